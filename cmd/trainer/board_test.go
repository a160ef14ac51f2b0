package main

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
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
	return rec
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
	// Two run directories of the same name stay apart.
	h2, err := newBoardHandler([]string{a, a})
	if err != nil {
		t.Fatal(err)
	}
	runs = decodeBoard[[]boardRunInfo](t, getBoard(t, h2, "/api/runs"))
	if runs[0].Name == runs[1].Name {
		t.Errorf("names %q, %q", runs[0].Name, runs[1].Name)
	}
	if _, err := newBoardHandler([]string{filepath.Join(parent, "missing")}); err == nil {
		t.Error("a missing run directory is accepted")
	}
	if code, _, stderr := runCLI(t, "board", filepath.Join(parent, "missing")); code != 2 {
		t.Errorf("trainer board on a missing directory: exit %d (%s), want 2", code, stderr)
	}
}

func TestBoardMetricsGrow(t *testing.T) {
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

func TestBoardServesEmbeddedAssets(t *testing.T) {
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

// TestBoardBrowser loads the page in headless Chromium twice while a run
// trains (a goroutine appends metric lines) and checks the plotted points
// grow, then takes a screenshot and checks it is not blank. Set
// PROBFORMER_BOARD_SCREENSHOT to a path to keep the screenshot.
func TestBoardBrowser(t *testing.T) {
	const chromium = "/usr/bin/chromium"
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s: the page is not tested in a browser", chromium)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	parent := t.TempDir()
	growing := boardRunDir(t, parent, "growing", 20)
	other := boardRunDir(t, parent, "other", 40)
	h, err := newBoardHandler([]string{growing, other})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	srvCtx, stopSrv := context.WithCancel(ctx)
	wg.Add(2)
	go func() { defer wg.Done(); serveBoard(srvCtx, ln, h) }()
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
			case <-srvCtx.Done():
				return
			case <-time.After(20 * time.Millisecond):
				appendMetric(t, f, step)
			}
		}
	}()
	defer wg.Wait()
	defer stopSrv()
	page := "http://" + ln.Addr().String() + "/"

	browse := func(extra ...string) []byte {
		t.Helper()
		args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000"}, extra...)
		cmd := exec.CommandContext(ctx, chromium, append(args, page)...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium: %v\n%s", err, errOut.Bytes())
		}
		return out.Bytes()
	}
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
	g1, o1 := points(browse("--dump-dom"))
	time.Sleep(300 * time.Millisecond)
	dom := browse("--dump-dom")
	g2, o2 := points(dom)
	t.Logf("growing run: %d then %d points; other: %d, %d", g1, g2, o1, o2)
	if g1 < 20 || g2 <= g1 {
		t.Errorf("growing run: %d then %d points, want at least 20 and growing", g1, g2)
	}
	// 40 training lines and 4 evaluation lines.
	if o1 != 44 || o2 != 44 {
		t.Errorf("finished run: %d, %d points, want 44", o1, o2)
	}
	for _, want := range []string{`id="eval-table"`, `class="uplot`, `data-metric="train_loss"`, `/api/image?run=1&amp;name=clicks.png`} {
		if !strings.Contains(string(dom), want) {
			t.Errorf("the page lacks %s", want)
		}
	}

	shot := filepath.Join(t.TempDir(), "board.png")
	browse("--screenshot="+shot, "--window-size=1200,800")
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
