package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// boardDeadline bounds each request of these tests: generous, since the
// point is that nothing blocks, not how fast the board is.
const boardDeadline = 10 * time.Second

// getWithin GETs url, failing the test if no answer came within
// boardDeadline, and decodes the JSON reply into v.
func getWithin(t *testing.T, url string, v any) {
	t.Helper()
	client := &http.Client{Timeout: boardDeadline}
	start := time.Now()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v (after %v)", url, err, time.Since(start).Round(time.Millisecond))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestBoardFIFOMetrics: a run whose metrics.jsonl is a named pipe (FIFO)
// with no writer does not hang the board. Before, opening it blocked
// while holding the run's lock, and /api/runs and the run's metrics hung
// for ever. Now the FIFO is refused (it shows no lines), the other run's
// metrics and /api/runs answer, and so does the FIFO run's metrics and
// its config, again and again.
func TestBoardFIFOMetrics(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	boardRunDir(t, parent, "a", 30)
	b := filepath.Join(parent, "b")
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b, "config.yaml"), []byte("task: maxnorm\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(b, "metrics.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A FIFO as a run's config and one as a PNG of run a's listing are
	// refused as well.
	c := filepath.Join(parent, "c")
	if err := os.MkdirAll(c, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c, "metrics.jsonl"), []byte(`{"step":1,"train_loss":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(c, "config.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := newBoardHandler([]string{parent})
	if err != nil {
		t.Fatal(err)
	}
	page := serveTestBoard(t, h)
	index := map[string]int{}
	for round := range 3 {
		var runs []boardRunInfo
		getWithin(t, page+"api/runs", &runs)
		if len(runs) != 3 {
			t.Fatalf("runs %+v, want a, b and c", runs)
		}
		for _, r := range runs {
			index[r.Name] = r.Index
		}
		for _, r := range runs {
			switch r.Name {
			case "a":
				if r.Lines != 33 || r.Eval == nil {
					t.Errorf("round %d: run a has %d lines, eval %v; want 33 and an evaluation", round, r.Lines, r.Eval)
				}
			case "b":
				if r.Lines != 0 || r.Config != "task: maxnorm\n" {
					t.Errorf("round %d: run b (FIFO metrics) %+v, want no line and its config", round, r)
				}
			case "c":
				if r.Lines != 1 || r.Config != "" {
					t.Errorf("round %d: run c (FIFO config) %+v, want 1 line and no config", round, r)
				}
			}
		}
		var m boardMetricsReply
		getWithin(t, fmt.Sprintf("%sapi/metrics?run=%d", page, index["b"]), &m)
		if m.Total != 0 || len(m.Lines) != 0 {
			t.Errorf("round %d: FIFO run's metrics %+v, want none", round, m)
		}
		getWithin(t, fmt.Sprintf("%sapi/metrics?run=%d", page, index["a"]), &m)
		if m.Total != 33 || len(m.Lines) != 33 {
			t.Errorf("round %d: run a's metrics: %d of %d lines, want 33", round, len(m.Lines), m.Total)
		}
	}
	// The FIFO, opened by nobody else, is still waiting for a reader: the
	// board did not take it (a non-blocking open for writing fails with
	// ENXIO when no reader has it open).
	if f, err := os.OpenFile(filepath.Join(b, "metrics.jsonl"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
		t.Errorf("the board holds the FIFO open")
	}
}

// TestBoardReplacedMetrics: a metrics.jsonl replaced by a larger,
// different file (a new inode: a run restarted into the directory) or
// rewritten in place with more lines is read again from its start. The
// board shows the new file's lines only, and a page that had the old
// lines (since=N&gen=G) gets them all from the first. Before, the offset
// reset only when the file shrank, so the page showed the old lines
// followed by the new file's tail.
func TestBoardReplacedMetrics(t *testing.T) {
	t.Parallel()
	dir := boardRunDir(t, t.TempDir(), "run", 3)
	metrics := filepath.Join(dir, "metrics.jsonl")
	h, err := newBoardHandler([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	type reply struct {
		Gen   int              `json:"gen"`
		Since int              `json:"since"`
		Total int              `json:"total"`
		Lines []map[string]any `json:"lines"`
	}
	first := decodeBoard[reply](t, getBoard(t, h, "/api/metrics?run=0"))
	if first.Total != 3 {
		t.Fatalf("first read %+v", first)
	}
	// writeNew writes lines of train_loss 100+i, steps 1000+i, to a file.
	writeNew := func(path string, n int) {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"step":%d,"train_loss":%d}`+"\n", 1000+i, 100+i)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	onlyNew := func(what string, r reply, n int) {
		t.Helper()
		if r.Since != 0 || r.Total != n || len(r.Lines) != n {
			t.Fatalf("%s: since %d, %d of %d lines; want all %d from 0", what, r.Since, len(r.Lines), r.Total, n)
		}
		for i, l := range r.Lines {
			if l["step"] != float64(1000+i) {
				t.Fatalf("%s: line %d is %v, want step %d: old lines are mixed in", what, i, l, 1000+i)
			}
		}
	}

	// Replaced by a larger file: a new inode.
	next := filepath.Join(dir, "metrics.jsonl.new")
	writeNew(next, 8)
	if err := os.Rename(next, metrics); err != nil {
		t.Fatal(err)
	}
	r := decodeBoard[reply](t, getBoard(t, h, fmt.Sprintf("/api/metrics?run=0&since=3&gen=%d", first.Gen)))
	onlyNew("replaced, page with the old lines", r, 8)
	if r.Gen == first.Gen {
		t.Errorf("generation %d unchanged after the file was replaced", r.Gen)
	}
	onlyNew("replaced, new page", decodeBoard[reply](t, getBoard(t, h, "/api/metrics?run=0")), 8)
	runs := decodeBoard[[]boardRunInfo](t, getBoard(t, h, "/api/runs"))
	if runs[0].Lines != 8 || runs[0].Eval != nil {
		t.Errorf("/api/runs: %d lines, eval %v; want 8 and no evaluation (the old file's)", runs[0].Lines, runs[0].Eval)
	}
	// A page up to date is sent what is new only.
	same := decodeBoard[reply](t, getBoard(t, h, fmt.Sprintf("/api/metrics?run=0&since=8&gen=%d", r.Gen)))
	if same.Since != 8 || len(same.Lines) != 0 || same.Gen != r.Gen {
		t.Errorf("unchanged file: %+v", same)
	}

	// Rewritten in place (same inode) with more, different lines.
	f, err := os.OpenFile(metrics, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		fmt.Fprintf(f, `{"step":%d,"train_loss":%d,"lr":0.5}`+"\n", 1000+i, 7+i)
	}
	f.Close()
	again := decodeBoard[reply](t, getBoard(t, h, fmt.Sprintf("/api/metrics?run=0&since=8&gen=%d", r.Gen)))
	onlyNew("rewritten in place", again, 12)
	if again.Lines[0]["lr"] != 0.5 {
		t.Errorf("rewritten in place: first line %v, want the new file's", again.Lines[0])
	}
	if rec := getBoard(t, h, "/api/metrics?run=0&gen=x"); rec.Code != http.StatusBadRequest {
		t.Errorf("gen=x: status %d, want 400", rec.Code)
	}
}
