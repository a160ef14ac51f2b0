package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeTestPNG writes a small gradient PNG.
func writeTestPNG(t *testing.T, path string) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for y := range 16 {
		for x := range 16 {
			img.Set(x, y, color.RGBA{uint8(16 * x), uint8(16 * y), 128, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// boardRunDir makes a run directory with a config, steps training lines
// (an evaluation every 100 steps) and a PNG at the top and one below.
func boardRunDir(t *testing.T, parent, name string, steps int) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("task: maxnorm\nseed: "+name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for s := 1; s <= steps; s++ {
		appendMetric(t, f, s)
	}
	f.Close()
	writeTestPNG(t, filepath.Join(dir, "clicks.png"))
	writeTestPNG(t, filepath.Join(dir, "attention", "layer0.png"))
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not an image"), 0o644)
	return dir
}

// appendMetric writes step's training line, and an evaluation line when
// step is a multiple of 100.
func appendMetric(t *testing.T, w io.Writer, step int) {
	fmt.Fprintf(w, `{"step":%d,"train_loss":%g,"lr":0.001}`+"\n", step*10, 5/float64(step))
	if step%10 == 0 {
		fmt.Fprintf(w, `{"step":%d,"valid_mse":%g,"valid_mae":%g,"wall_sec":%d}`+"\n", step*10, 1/float64(step), 2/float64(step), step)
	}
}

func getBoard(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	return getBoardAs(h, target, "127.0.0.1:6006")
}

// getBoardAs requests target with the Host header host.
func getBoardAs(h http.Handler, target, host string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", target, nil)
	req.Host = host
	h.ServeHTTP(rec, req)
	return rec
}

// TestBoardRefusesOtherHosts: on loopback, a request whose Host names
// another site (a page that rebound its name to 127.0.0.1) gets 403 on
// every path; an IP address, localhost and this machine's name get the
// board, and bound beyond loopback any name does.
func TestBoardRefusesOtherHosts(t *testing.T) {
	b, err := newBoardHandler([]string{t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	hosts := map[string]int{
		"evil.example:6006": http.StatusForbidden, "evil.example": http.StatusForbidden,
		"127.0.0.1:6006": http.StatusOK, "[::1]:6006": http.StatusOK, "localhost:6006": http.StatusOK, "LOCALHOST": http.StatusOK,
		"192.168.1.20:6006": http.StatusOK,
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		hosts[name+":6006"], hosts[name+".evil.example"] = http.StatusOK, http.StatusForbidden
	}
	for host, want := range hosts {
		for _, target := range []string{"/", "/api/runs"} {
			if got := getBoardAs(b.handler, target, host).Code; got != want {
				t.Errorf("GET %s with Host %q: status %d, want %d", target, host, got, want)
			}
		}
	}
	// served on another interface than loopback, any name reaches it
	b.anyHost = true
	if got := getBoardAs(b.handler, "/api/runs", "board.example.com:6006").Code; got != http.StatusOK {
		t.Errorf("bound beyond loopback, Host board.example.com: status %d, want 200", got)
	}
}

func decodeBoard[T any](t *testing.T, rec *httptest.ResponseRecorder) T {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	return v
}

type boardMetricsReply struct {
	Since int              `json:"since"`
	Total int              `json:"total"`
	Lines []map[string]any `json:"lines"`
}

func TestBoardRunsList(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	a := boardRunDir(t, parent, "alpha", 25)
	b := boardRunDir(t, parent, "beta", 5)
	h, err := newBoardHandler([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	runs := decodeBoard[[]boardRunInfo](t, getBoard(t, h, "/api/runs"))
	if len(runs) != 2 || runs[0].Name != "alpha" || runs[1].Name != "beta" || runs[1].Index != 1 {
		t.Fatalf("runs %+v", runs)
	}
	if !strings.Contains(runs[0].Config, "seed: alpha") || !strings.Contains(runs[1].Config, "seed: beta") {
		t.Errorf("configs %q, %q", runs[0].Config, runs[1].Config)
	}
	if runs[0].Lines != 27 || runs[1].Lines != 5 {
		t.Errorf("lines %d, %d; want 27, 5", runs[0].Lines, runs[1].Lines)
	}
	// The evaluation is the latest line with a valid_ field.
	if e := runs[0].Eval; e == nil || e["step"] != 200.0 || e["valid_mse"] != 1/20.0 {
		t.Errorf("alpha eval %v, want step 200", e)
	}
	if runs[1].Eval != nil {
		t.Errorf("beta has no evaluation, got %v", runs[1].Eval)
	}
	// Two run directories of the same name stay apart; one given twice
	// is one run.
	a2 := boardRunDir(t, t.TempDir(), "alpha", 3)
	h2, err := newBoardHandler([]string{a, a2, a})
	if err != nil {
		t.Fatal(err)
	}
	runs = decodeBoard[[]boardRunInfo](t, getBoard(t, h2, "/api/runs"))
	if len(runs) != 2 || runs[0].Name != "alpha" || runs[1].Name != "alpha (2)" || runs[1].Lines != 3 {
		t.Errorf("runs %+v, want alpha and alpha (2)", runs)
	}
	if _, err := newBoardHandler([]string{filepath.Join(parent, "missing")}); err == nil {
		t.Error("a missing run directory is accepted")
	}
	if code, _, stderr := runCLI(t, "board", filepath.Join(parent, "missing")); code != 2 {
		t.Errorf("trainer board on a missing directory: exit %d (%s), want 2", code, stderr)
	}
}

// boardTree makes the files and directories of a tree below root: a
// path ending in "/" is a directory, "a -> b" a symbolic link to b
// (relative to the link's directory), anything else a file.
func boardTree(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if link, target, ok := strings.Cut(p, " -> "); ok {
			full := filepath.Join(root, link)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(`{"step":1,"train_loss":2}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// boardNames is the names of the board's runs, in order.
func boardNames(t *testing.T, h http.Handler) []string {
	t.Helper()
	var names []string
	for i, r := range decodeBoard[[]boardRunInfo](t, getBoard(t, h, "/api/runs")) {
		if r.Index != i {
			t.Errorf("run %q has index %d at %d", r.Name, r.Index, i)
		}
		names = append(names, r.Name)
	}
	return names
}

// TestBoardFindsRuns: a directory given is searched, as TensorBoard's
// --logdir, for every run at or below it (a directory holding
// metrics.jsonl, config.yaml or a checkpoint), named by its path relative
// to it; links and hidden directories are not entered; a directory with
// no run is a warning.
func TestBoardFindsRuns(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	boardTree(t, outside, "elsewhere/metrics.jsonl")
	tests := []struct {
		name  string
		tree  []string
		args  []string // below the tree's root; none: the root itself
		want  []string
		warns []string // a substring of each warning, in order
	}{
		{"two runs in subdirectories", []string{"a/metrics.jsonl", "b/config.yaml"}, nil, []string{"a", "b"}, nil},
		{"nested at any depth, in order", []string{"sweep/lr=1e-3/metrics.jsonl", "sweep/lr=1e-2/metrics.jsonl", "alpha/config.yaml", "x/y/z/w/best.ckpt"}, nil,
			[]string{"alpha", "sweep/lr=1e-2", "sweep/lr=1e-3", "x/y/z/w"}, nil},
		{"checkpoints only", []string{"r/step-00000100.ckpt", "not/step-x.ckpt", "not/notes.txt"}, nil, []string{"r"}, nil},
		{"the directory is a run, and so is one below it", []string{"metrics.jsonl", "attention/layer0.png", "finetune/config.yaml"}, nil,
			[]string{"ROOT", "finetune"}, nil},
		{"no run", []string{"empty/", "data/train.txt"}, nil, nil, []string{"no run in ROOT"}},
		{"links and hidden directories are not entered", []string{"a/metrics.jsonl", "link -> " + filepath.Join(outside, "elsewhere"),
			"alias -> a", ".git/metrics.jsonl", "b/metrics.jsonl -> ../a/metrics.jsonl"}, nil, []string{"a"}, nil},
		{"several directories are prefixed with their names", []string{"one/a/metrics.jsonl", "one/b/metrics.jsonl", "two/a/metrics.jsonl", "three/metrics.jsonl"},
			[]string{"one", "two", "three"}, []string{"one/a", "one/b", "two/a", "three"}, nil},
		{"a warning for the empty one of several", []string{"one/a/metrics.jsonl", "two/"},
			[]string{"one", "two"}, []string{"one/a"}, []string{"no run in ROOT/two"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			boardTree(t, root, tt.tree...)
			args := []string{root}
			if tt.args != nil {
				args = nil
				for _, a := range tt.args {
					args = append(args, filepath.Join(root, a))
				}
			}
			h, err := newBoardHandler(args)
			if err != nil {
				t.Fatal(err)
			}
			real, _ := filepath.EvalSymlinks(root)
			var want []string
			for _, w := range tt.want {
				want = append(want, strings.ReplaceAll(w, "ROOT", filepath.Base(real)))
			}
			if got := boardNames(t, h); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("runs %q, want %q", got, want)
			}
			status := decodeBoard[boardStatus](t, getBoard(t, h, "/api/status"))
			if len(status.Warnings) != len(tt.warns) || status.Runs != len(want) {
				t.Fatalf("status %+v, want %d runs and warnings %q", status, len(want), tt.warns)
			}
			for i, w := range tt.warns {
				if w = strings.ReplaceAll(w, "ROOT", root); !strings.Contains(status.Warnings[i], w) {
					t.Errorf("warning %q, want %q", status.Warnings[i], w)
				}
			}
		})
	}
}

// TestBoardWalkBounds: the walk stops at its depth, directory and run
// bounds, and says so.
func TestBoardWalkBounds(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	boardTree(t, root, "a/metrics.jsonl", "b/metrics.jsonl", "c/metrics.jsonl", "d/1/2/3/metrics.jsonl")
	tests := []struct {
		name                    string
		maxDepth, maxDirs, runs int
		want                    []string
		warn                    string
	}{
		{"depth", 2, 100, 100, []string{"a", "b", "c"}, "more than 2 levels below"},
		{"directories", 10, 3, 100, []string{"a", "b"}, "after 3 directories"},
		{"runs", 10, 100, 2, []string{"a", "b"}, "at most 2 runs"},
		{"none reached", 10, 100, 100, []string{"a", "b", "c", "d/1/2/3"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := newBoardHandler([]string{t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			b.roots[0] = boardRoot{arg: root, dir: root}
			b.maxDepth, b.maxDirs, b.maxRuns = tt.maxDepth, tt.maxDirs, tt.runs
			b.scan()
			if got := boardNames(t, b); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("runs %q, want %q", got, tt.want)
			}
			warns := b.warnings()
			if tt.warn == "" && len(warns) != 0 || tt.warn != "" && (len(warns) != 1 || !strings.Contains(warns[0], tt.warn)) {
				t.Errorf("warnings %q, want one with %q", warns, tt.warn)
			}
		})
	}
}

// TestBoardRescan: runs started after the board are found by the next
// walk, keep the indexes of those found before, and end the warning.
func TestBoardRescan(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	b, err := newBoardHandler([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	if names, warns := boardNames(t, b), b.warnings(); len(names) != 0 || len(warns) != 1 {
		t.Fatalf("empty directory: runs %q, warnings %q", names, warns)
	}
	boardRunDir(t, root, "later", 3)
	if names := boardNames(t, b); len(names) != 0 {
		t.Errorf("runs %q before the next walk is due", names)
	}
	b.rescan = 0
	if names := boardNames(t, b); fmt.Sprint(names) != "[later]" {
		t.Errorf("runs %q, want [later]", names)
	}
	boardRunDir(t, root, "earlier", 2)
	if names := boardNames(t, b); fmt.Sprint(names) != "[later earlier]" {
		t.Errorf("runs %q, want [later earlier]: a run keeps its index", names)
	}
	if status := decodeBoard[boardStatus](t, getBoard(t, b, "/api/status")); len(status.Warnings) != 0 || status.Runs != 2 {
		t.Errorf("status %+v, want 2 runs, no warning", status)
	}
	m := decodeBoard[boardMetricsReply](t, getBoard(t, b, "/api/metrics?run=1"))
	if m.Total != 2 {
		t.Errorf("the second run found has %d lines, want 2", m.Total)
	}
}

// TestBoardWarnsOnStderr: `trainer board` on a directory with no run
// says so on stderr before it listens (here it then fails to, and exits).
func TestBoardWarnsOnStderr(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, _, stderr := runCLI(t, "board", dir, "--addr", "256.0.0.1:1")
	if code != 2 || !strings.Contains(stderr, "board: warning: no run in "+dir) || !strings.Contains(stderr, "--addr") {
		t.Errorf("exit %d, stderr %q: want a warning of no run, then the --addr error", code, stderr)
	}
	boardRunDir(t, dir, "a", 1)
	if code, _, stderr := runCLI(t, "board", dir, "--addr", "256.0.0.1:1"); code != 2 || strings.Contains(stderr, "warning") {
		t.Errorf("with a run: exit %d, stderr %q", code, stderr)
	}
}

func TestBoardMetricsGrow(t *testing.T) {
	t.Parallel()
	dir := boardRunDir(t, t.TempDir(), "run", 3)
	h, err := newBoardHandler([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	m := decodeBoard[boardMetricsReply](t, getBoard(t, h, "/api/metrics?run=0"))
	if m.Total != 3 || len(m.Lines) != 3 || m.Lines[2]["step"] != 30.0 {
		t.Fatalf("first read %+v", m)
	}
	f, err := os.OpenFile(filepath.Join(dir, "metrics.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A partially written line is not a line yet.
	fmt.Fprint(f, `{"step":40,"train_lo`)
	m = decodeBoard[boardMetricsReply](t, getBoard(t, h, "/api/metrics?run=0&since=3"))
	if m.Total != 3 || len(m.Lines) != 0 {
		t.Fatalf("after a partial line %+v", m)
	}
	fmt.Fprint(f, `ss":1.25}`+"\n")
	appendMetric(t, f, 5)
	m = decodeBoard[boardMetricsReply](t, getBoard(t, h, "/api/metrics?run=0&since=3"))
	if m.Total != 5 || m.Since != 3 || len(m.Lines) != 2 || m.Lines[0]["train_loss"] != 1.25 || m.Lines[1]["step"] != 50.0 {
		t.Fatalf("after appending %+v", m)
	}
	// A bad complete line is skipped and counted; the rest still reads.
	fmt.Fprint(f, "not json\n")
	appendMetric(t, f, 6)
	runs := decodeBoard[[]boardRunInfo](t, getBoard(t, h, "/api/runs"))
	if runs[0].Lines != 6 || runs[0].Skipped != 1 {
		t.Errorf("lines %d skipped %d, want 6 and 1", runs[0].Lines, runs[0].Skipped)
	}
	// A rewritten (shorter) file is read again from the start.
	boardRunDir(t, filepath.Dir(dir), "run", 2)
	m = decodeBoard[boardMetricsReply](t, getBoard(t, h, "/api/metrics?run=0&since=6"))
	if m.Total != 2 || m.Since != 0 || len(m.Lines) != 2 {
		t.Errorf("after rewriting %+v", m)
	}
	for _, bad := range []string{"run=1", "run=-1", "run=x", "run=0&since=-2", "run=0&since=z"} {
		if rec := getBoard(t, h, "/api/metrics?"+bad); rec.Code == http.StatusOK {
			t.Errorf("%s: status %d", bad, rec.Code)
		}
	}
}

func TestBoardImageListing(t *testing.T) {
	t.Parallel()
	dir := boardRunDir(t, t.TempDir(), "run", 1)
	want := writeTestPNG(t, filepath.Join(dir, "attention", "layer1.png"))
	h, err := newBoardHandler([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	runs := decodeBoard[[]boardRunInfo](t, getBoard(t, h, "/api/runs"))
	var names []string
	for _, im := range runs[0].Images {
		names = append(names, im.Name)
	}
	if got := strings.Join(names, " "); got != "attention/layer0.png attention/layer1.png clicks.png" {
		t.Errorf("images %q", got)
	}
	// A run directory given as a link lists its target's images.
	link := filepath.Join(t.TempDir(), "latest")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	hl, err := newBoardHandler([]string{link})
	if err != nil {
		t.Fatal(err)
	}
	if linked := decodeBoard[[]boardRunInfo](t, getBoard(t, hl, "/api/runs")); len(linked[0].Images) != 3 {
		t.Errorf("run given as a link: images %+v", linked[0].Images)
	}
	rec := getBoard(t, h, "/api/image?run=0&name="+url.QueryEscape("attention/layer1.png"))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "image/png" || !bytes.Equal(rec.Body.Bytes(), want) {
		t.Errorf("image: status %d, type %q, %d bytes", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
}

func TestBoardRefusesPathEscape(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dir := boardRunDir(t, parent, "run", 1)
	secret := filepath.Join(parent, "secret.png")
	writeTestPNG(t, secret)
	// A link in the run directory to a file outside it is not listed.
	if err := os.Symlink(secret, filepath.Join(dir, "link.png")); err != nil {
		t.Fatal(err)
	}
	h, err := newBoardHandler([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../secret.png", "..%2Fsecret.png", secret, "link.png", "attention/../../secret.png",
		"./clicks.png", "/etc/passwd", "notes.txt", "config.yaml", ""} {
		rec := getBoard(t, h, "/api/image?run=0&name="+url.QueryEscape(name))
		if rec.Code != http.StatusNotFound {
			t.Errorf("name %q: status %d, want 404", name, rec.Code)
		}
	}
	for _, target := range []string{"/api/image?run=1&name=clicks.png", "/api/image?run=-1&name=clicks.png",
		"/static/../board.go", "/static/..%2fboard.go", "/../secret.png", "/static/%2e%2e/board_test.go"} {
		rec := getBoard(t, h, target)
		if rec.Code == http.StatusOK || strings.Contains(rec.Body.String(), "package main") {
			t.Errorf("%s: status %d", target, rec.Code)
		}
	}
	if rec := getBoard(t, h, "/api/image?run=0&name=clicks.png"); rec.Code != http.StatusOK {
		t.Errorf("a listed image: status %d", rec.Code)
	}
}

// TestBoardParentRefusesLinksOut: a board over a directory of runs
// serves nothing through links out of it: a linked directory is not a
// run, and a run's metrics.jsonl, config.yaml or PNG that is a link to a
// file outside the run is not read.
func TestBoardParentRefusesLinksOut(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	secretRun := boardRunDir(t, outside, "secret", 5)
	os.WriteFile(filepath.Join(secretRun, "config.yaml"), []byte("password: hunter2\n"), 0o644)
	parent := t.TempDir()
	boardRunDir(t, parent, "run", 1)
	boardTree(t, parent,
		"linked -> "+secretRun,
		"leaky/metrics.jsonl -> "+filepath.Join(secretRun, "metrics.jsonl"),
		"leaky/best.ckpt",
		"leaky/config.yaml -> "+filepath.Join(secretRun, "config.yaml"),
		"leaky/clicks.png -> "+filepath.Join(secretRun, "clicks.png"),
		"leaky/attention -> "+filepath.Join(secretRun, "attention"))
	h, err := newBoardHandler([]string{parent})
	if err != nil {
		t.Fatal(err)
	}
	runs := decodeBoard[[]boardRunInfo](t, getBoard(t, h, "/api/runs"))
	if len(runs) != 2 || runs[0].Name != "leaky" || runs[1].Name != "run" {
		t.Fatalf("runs %+v, want leaky and run", runs)
	}
	leaky := runs[0]
	if leaky.Lines != 0 || leaky.Config != "" || len(leaky.Images) != 0 {
		t.Errorf("leaky run shows %d lines, config %q, images %+v: read through links out of it", leaky.Lines, leaky.Config, leaky.Images)
	}
	if m := decodeBoard[boardMetricsReply](t, getBoard(t, h, "/api/metrics?run=0")); m.Total != 0 {
		t.Errorf("leaky metrics: %d lines", m.Total)
	}
	for _, name := range []string{"clicks.png", "attention/layer0.png", "../linked/clicks.png", "../../" + filepath.Base(outside) + "/secret/clicks.png"} {
		if rec := getBoard(t, h, "/api/image?run=0&name="+url.QueryEscape(name)); rec.Code == http.StatusOK {
			t.Errorf("leaky run, %q: status %d", name, rec.Code)
		}
	}
	for _, target := range []string{"/api/image?run=1&name=..%2F..%2Fsecret%2Fclicks.png", "/api/image?run=1&name=%2e%2e/leaky/clicks.png",
		"/api/image?run=1&name=" + url.QueryEscape(filepath.Join(secretRun, "clicks.png")), "/static/%2e%2e/%2e%2e/board.go"} {
		if rec := getBoard(t, h, target); rec.Code == http.StatusOK {
			t.Errorf("%s: status %d", target, rec.Code)
		}
	}
}

func TestBoardServesEmbeddedAssets(t *testing.T) {
	t.Parallel()
	h, err := newBoardHandler([]string{t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	page := getBoard(t, h, "/")
	if page.Code != http.StatusOK || !strings.Contains(page.Body.String(), `src="/static/uPlot.iife.min.js"`) {
		t.Fatalf("page: %d %s", page.Code, page.Body)
	}
	// The vendored uPlot is the version board/VERSION names.
	version, err := os.ReadFile(filepath.Join("board", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`^uPlot (\d+\.\d+\.\d+)`).FindSubmatch(version)
	if v == nil {
		t.Fatalf("board/VERSION: %q", version)
	}
	js := getBoard(t, h, "/static/uPlot.iife.min.js")
	if js.Code != http.StatusOK || !strings.Contains(js.Body.String()[:100], "(v"+string(v[1])+")") {
		t.Errorf("uPlot.iife.min.js: status %d, header %q, want v%s", js.Code, js.Body.String()[:min(100, js.Body.Len())], v[1])
	}
	for _, asset := range []string{"/static/uPlot.min.css", "/static/board.js", "/static/board.css"} {
		if rec := getBoard(t, h, asset); rec.Code != http.StatusOK || rec.Body.Len() == 0 {
			t.Errorf("%s: status %d", asset, rec.Code)
		}
	}
}

// boardChromium is the browser the page is tested in.
const boardChromium = "/usr/bin/chromium"

// chromiumMu lets one test's browser run at a time.
var chromiumMu sync.Mutex

// browseBoard loads page in headless Chromium (3 s of virtual time, so
// the page polls a few times) and returns what it prints: the DOM with
// --dump-dom (--screenshot=F also writes a PNG to F).
func browseBoard(ctx context.Context, t *testing.T, page string, extra ...string) []byte {
	t.Helper()
	// One browser at a time: two headless Chromiums beside the other
	// tests on two cores can outlast any deadline.
	chromiumMu.Lock()
	defer chromiumMu.Unlock()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000"}, extra...)
	cmd := exec.CommandContext(ctx, boardChromium, append(args, page)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errOut.Bytes())
	}
	return out.Bytes()
}

// serveTestBoard serves h on a free port until the test ends and returns
// the page's address.
func serveTestBoard(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); serveBoard(ctx, ln, h) }()
	t.Cleanup(func() { stop(); <-done })
	return "http://" + ln.Addr().String() + "/"
}

// TestBoardBrowser points the board at a parent directory of two runs,
// one in a subdirectory of a subdirectory, and loads the page in headless
// Chromium twice while one run trains (a goroutine appends metric lines):
// both runs are shown, by their paths below the parent, and the plotted
// points grow; the second load takes a screenshot, which must not be
// blank. Set
// PROBFORMER_BOARD_SCREENSHOT to a path to keep the screenshot.
func TestBoardBrowser(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(boardChromium); err != nil {
		t.Skipf("no %s: the page is not tested in a browser", boardChromium)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	parent := t.TempDir()
	growing := boardRunDir(t, parent, "growing", 20)
	boardRunDir(t, filepath.Join(parent, "sweep"), "other", 40)
	h, err := newBoardHandler([]string{parent})
	if err != nil {
		t.Fatal(err)
	}
	page := serveTestBoard(t, h)
	var wg sync.WaitGroup
	trainCtx, stopTraining := context.WithCancel(ctx)
	wg.Add(1)
	// The training run: a line every 20 ms.
	go func() {
		defer wg.Done()
		f, err := os.OpenFile(filepath.Join(growing, "metrics.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		for step := 21; ; step++ {
			select {
			case <-trainCtx.Done():
				return
			case <-time.After(20 * time.Millisecond):
				appendMetric(t, f, step)
			}
		}
	}()
	defer wg.Wait()
	defer stopTraining()

	points := func(dom []byte) (int, int) {
		t.Helper()
		var n [2]int
		for i := range n {
			m := regexp.MustCompile(`<li data-run="` + strconv.Itoa(i) + `" data-points="(\d+)"`).FindSubmatch(dom)
			if m == nil {
				t.Fatalf("no data-points for run %d in the DOM:\n%s", i, dom)
			}
			n[i], _ = strconv.Atoi(string(m[1]))
		}
		return n[0], n[1]
	}
	g1, o1 := points(browseBoard(ctx, t, page, "--dump-dom"))
	time.Sleep(300 * time.Millisecond)
	// The second load also takes the screenshot.
	shot := filepath.Join(t.TempDir(), "board.png")
	dom := browseBoard(ctx, t, page, "--dump-dom", "--screenshot="+shot, "--window-size=1200,800")
	g2, o2 := points(dom)
	t.Logf("growing run: %d then %d points; other: %d, %d", g1, g2, o1, o2)
	if g1 < 20 || g2 <= g1 {
		t.Errorf("growing run: %d then %d points, want at least 20 and growing", g1, g2)
	}
	// 40 training lines and 4 evaluation lines.
	if o1 != 44 || o2 != 44 {
		t.Errorf("finished run: %d, %d points, want 44", o1, o2)
	}
	for _, want := range []string{`<li data-run="0" data-points="`, `<b>growing</b>`, `<li data-run="1" data-points="`, `<b>sweep/other</b>`,
		`id="eval-table"`, `class="uplot`, `data-metric="train_loss"`, `/api/image?run=1&amp;name=clicks.png`} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(string(dom), `class="warning"`) {
		t.Errorf("the page warns of a board with two runs")
	}

	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	colors := map[color.Color]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			colors[color.RGBAModel.Convert(img.At(x, y))] = true
		}
	}
	if b.Dx() != 1200 || b.Dy() != 800 || len(colors) < 20 {
		t.Errorf("screenshot %v with %d colours: blank?", b, len(colors))
	}
	if keep := os.Getenv("PROBFORMER_BOARD_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TestBoardBrowserPage: in headless Chromium, a board with no run shows
// the warning; the smoothing control (set by ?smoothing=) draws each run
// twice, raw and smoothed; an evaluation spanning decades gets a log
// scale as the loss does, one that does not keeps a linear one.
func TestBoardBrowserPage(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(boardChromium); err != nil {
		t.Skipf("no %s: the page is not tested in a browser", boardChromium)
	}
	empty := t.TempDir()
	boardTree(t, empty, "data/train.txt")
	runs := t.TempDir()
	boardRunDir(t, runs, "a", 30) // valid_mse 1/10 … 1/30, valid_mae 2/10 … 2/30
	f, err := os.OpenFile(filepath.Join(runs, "a", "metrics.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, `{"step":400,"valid_mse":0.0005,"valid_accuracy":0.5}`)
	fmt.Fprintln(f, `{"step":410,"valid_accuracy":0.9}`)
	f.Close()
	tests := []struct {
		name, dir, query string
		want, not        []string
	}{
		{"no run", empty, "", []string{`class="warning"`, "no run in " + empty, `<p id="no-runs" class="empty">no runs yet</p>`}, []string{"<li data-run"}},
		{"smoothing and log scales", runs, "?smoothing=0.6",
			[]string{`<output id="smoothing-value" for="smoothing">0.60</output>`, ">a (raw)<", "train_loss (log scale)", "valid_mse (log scale)", ">valid_mae<", ">valid_accuracy<"},
			[]string{`class="warning"`, "valid_mae (log scale)", "valid_accuracy (log scale)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, err := newBoardHandler([]string{tt.dir})
			if err != nil {
				t.Fatal(err)
			}
			// The deadline starts here: a parallel subtest may wait long for
			// its turn.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dom := string(browseBoard(ctx, t, serveTestBoard(t, h)+tt.query, "--dump-dom"))
			for _, w := range tt.want {
				if !strings.Contains(dom, w) {
					t.Errorf("the page lacks %s", w)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(dom, w) {
					t.Errorf("the page has %s", w)
				}
			}
			if t.Failed() {
				t.Logf("DOM:\n%s", dom)
			}
		})
	}
}
