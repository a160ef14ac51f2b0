package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// boardAssets are the page, its script and the vendored uPlot (see
// board/VERSION for its version and how to refresh it).
//
//go:embed board/index.html board/board.js board/board.css board/uPlot.iife.min.js board/uPlot.min.css
var boardAssets embed.FS

func newBoardCommand() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "board RUN_DIR [RUN_DIR…]",
		Short: "Serve a local web page with the runs' live metric curves, configs, evaluations and images",
		Long: `Serve a web page that lists the run directories and shows their
metrics.jsonl as curves updating live while the runs train (the page polls
every second), their config.yaml side by side, the latest evaluation line
of each run as a table, and the PNGs the runs wrote. The page and its
charting library (uPlot) are embedded in the binary; nothing is fetched
from the network. Binds to 127.0.0.1 unless --addr says otherwise.

  trainer board checkpoints/scratch checkpoints/pretrained --addr 127.0.0.1:6006`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			h, err := newBoardHandler(dirs)
			if err != nil {
				return badInput(err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return badInput(fmt.Errorf("--addr: %w", err))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "board: http://%s/ (Ctrl-C to stop)\n", ln.Addr())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveBoard(ctx, ln, h)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:6006", "address to listen on")
	return cmd
}

// serveBoard serves h on ln until ctx is done.
func serveBoard(ctx context.Context, ln net.Listener, h http.Handler) error {
	if ctx == nil {
		ctx = context.Background()
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-done
		return nil
	}
}

// boardRun is one run directory and what has been read of its
// metrics.jsonl so far: the complete lines up to offset.
type boardRun struct {
	name string
	dir  string

	mu      sync.Mutex
	offset  int64
	lines   []json.RawMessage
	eval    map[string]any // the latest line with a valid_* field
	skipped int            // complete lines that are not JSON objects
}

type board struct {
	runs []*boardRun
}

// newBoardHandler returns the board's HTTP handler over the run
// directories, which must exist.
func newBoardHandler(dirs []string) (http.Handler, error) {
	b := &board{}
	seen := map[string]int{}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		// A run given as a link (checkpoints/latest) is its target, whose
		// files the listing walks.
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		st, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("board: %w", err)
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("board: %s is not a directory", d)
		}
		name := filepath.Base(abs)
		seen[name]++
		if n := seen[name]; n > 1 {
			name = fmt.Sprintf("%s (%d)", name, n)
		}
		b.runs = append(b.runs, &boardRun{name: name, dir: abs})
	}
	static, err := fs.Sub(boardAssets, "board")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		page, _ := fs.ReadFile(static, "index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(page)
	})
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /api/runs", b.serveRuns)
	mux.HandleFunc("GET /api/metrics", b.serveMetrics)
	mux.HandleFunc("GET /api/image", b.serveImage)
	return securityHeaders(mux), nil
}

func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self'; style-src 'self' 'unsafe-inline'")
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

// run returns the run the query's run parameter indexes, or writes a 404.
func (b *board) run(w http.ResponseWriter, r *http.Request) *boardRun {
	i, err := strconv.Atoi(r.URL.Query().Get("run"))
	if err != nil || i < 0 || i >= len(b.runs) {
		http.Error(w, "no such run", http.StatusNotFound)
		return nil
	}
	return b.runs[i]
}

// boardImage is a PNG in a run directory: its path relative to the
// directory (slash-separated), and its modification time for cache busting.
type boardImage struct {
	Name  string `json:"name"`
	Mtime int64  `json:"mtime"`
}

// maxBoardImages bounds the listing of a run's PNGs.
const maxBoardImages = 200

// images lists the regular .png files in the run directory and its
// subdirectories (two levels down), not following symbolic links.
func (run *boardRun) images() []boardImage {
	var out []boardImage
	filepath.WalkDir(run.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(run.dir, path)
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if rel != "." && strings.Count(filepath.ToSlash(rel), "/") >= 2 {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.EqualFold(filepath.Ext(path), ".png") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		out = append(out, boardImage{Name: filepath.ToSlash(rel), Mtime: info.ModTime().UnixMilli()})
		if len(out) >= maxBoardImages {
			return filepath.SkipAll
		}
		return nil
	})
	return out
}

// update reads the lines appended to metrics.jsonl since the last call.
// Only complete lines count: a partially written last line waits for its
// newline. A file shorter than what was read (rewritten) is read again.
func (run *boardRun) update() {
	run.mu.Lock()
	defer run.mu.Unlock()
	f, err := os.Open(filepath.Join(run.dir, train.MetricsFile))
	if err != nil {
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return
	}
	if st.Size() < run.offset {
		run.offset, run.lines, run.eval, run.skipped = 0, nil, nil, 0
	}
	if st.Size() == run.offset {
		return
	}
	data, err := io.ReadAll(io.NewSectionReader(f, run.offset, st.Size()-run.offset))
	if err != nil {
		return
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return
	}
	for _, line := range bytes.Split(data[:end], []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(line, &fields); err != nil {
			run.skipped++
			continue
		}
		run.lines = append(run.lines, json.RawMessage(slices.Clone(line)))
		for k := range fields {
			if strings.HasPrefix(k, "valid_") {
				run.eval = fields
				break
			}
		}
	}
	run.offset += int64(end + 1)
}

type boardRunInfo struct {
	Index   int            `json:"index"`
	Name    string         `json:"name"`
	Dir     string         `json:"dir"`
	Config  string         `json:"config"`
	Lines   int            `json:"lines"`
	Skipped int            `json:"skipped"`
	Eval    map[string]any `json:"eval"`
	Images  []boardImage   `json:"images"`
}

// maxBoardConfig bounds the config.yaml shown.
const maxBoardConfig = 1 << 20

func (b *board) serveRuns(w http.ResponseWriter, r *http.Request) {
	out := []boardRunInfo{}
	for i, run := range b.runs {
		run.update()
		info := boardRunInfo{Index: i, Name: run.name, Dir: run.dir, Images: run.images()}
		if f, err := os.Open(filepath.Join(run.dir, train.ConfigFile)); err == nil {
			data, _ := io.ReadAll(io.LimitReader(f, maxBoardConfig))
			f.Close()
			info.Config = string(data)
		}
		run.mu.Lock()
		info.Lines, info.Skipped, info.Eval = len(run.lines), run.skipped, run.eval
		run.mu.Unlock()
		if info.Images == nil {
			info.Images = []boardImage{}
		}
		out = append(out, info)
	}
	writeJSON(w, out)
}

// serveMetrics answers /api/metrics?run=I&since=N with the run's metric
// lines from the N-th on, and the total count, so a client polls only for
// what it has not seen.
func (b *board) serveMetrics(w http.ResponseWriter, r *http.Request) {
	run := b.run(w, r)
	if run == nil {
		return
	}
	since := 0
	if s := r.URL.Query().Get("since"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			http.Error(w, "bad since", http.StatusBadRequest)
			return
		}
		since = n
	}
	run.update()
	run.mu.Lock()
	total := len(run.lines)
	// A client ahead of the file (rewritten shorter) starts again.
	if since > total {
		since = 0
	}
	lines := slices.Clone(run.lines[since:])
	run.mu.Unlock()
	if lines == nil {
		lines = []json.RawMessage{}
	}
	writeJSON(w, struct {
		Run   int               `json:"run"`
		Since int               `json:"since"`
		Total int               `json:"total"`
		Lines []json.RawMessage `json:"lines"`
	}{slices.Index(b.runs, run), since, total, lines})
}

// serveImage answers /api/image?run=I&name=N with the PNG named N in the
// run's listing; the file opened is the listing's, never a path built
// from the request.
func (b *board) serveImage(w http.ResponseWriter, r *http.Request) {
	run := b.run(w, r)
	if run == nil {
		return
	}
	name := r.URL.Query().Get("name")
	listing := run.images()
	i := slices.IndexFunc(listing, func(im boardImage) bool { return im.Name == name })
	if i < 0 {
		http.Error(w, "no such image", http.StatusNotFound)
		return
	}
	rel := listing[i].Name
	path := filepath.Join(run.dir, filepath.FromSlash(rel))
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, "no such image", http.StatusNotFound)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.Error(w, "no such image", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "image/png")
	http.ServeContent(w, r, "", st.ModTime(), f)
}
