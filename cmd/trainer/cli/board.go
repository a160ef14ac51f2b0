package cli

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
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
		Use:   "board DIR [DIR…]",
		Short: "Serve a local web page with the runs' live metric curves, configs, evaluations and images",
		Long: `Serve a web page that lists the runs in the directories and shows their
metrics.jsonl as curves updating live while the runs train (the page polls
every second), their config.yaml side by side, the latest evaluation line
of each run as a table, and the PNGs the runs wrote. The page and its
charting library (uPlot) are embedded in the binary; nothing is fetched
from the network. Binds to 127.0.0.1 unless --addr says otherwise. On a
loopback address it answers only requests that name it by IP address,
localhost or this machine's host name, so that another site's page whose
name was made to resolve to 127.0.0.1 cannot read the runs (DNS
rebinding); on another address (--addr 0.0.0.0:6006) it answers any.

A DIR is a run directory or a directory of runs, as TensorBoard's --logdir:
every directory at or below it that holds metrics.jsonl, config.yaml or a
checkpoint (best.ckpt, step-N.ckpt) is a run, named by its path relative to
DIR (prefixed with DIR's name when several are given; a DIR that is itself
a run is named by its name). The walk follows no symbolic link, skips
hidden directories, goes at most 8 levels down, looks at no more than
20000 directories and takes the first 200 runs; it is repeated every few
seconds while the page is open, so runs started later appear. A DIR with
no run below it is reported on stderr and on the page.

  trainer board checkpoints
  trainer board checkpoints/scratch checkpoints/pretrained --addr 127.0.0.1:6006`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			b, err := newBoardHandler(dirs)
			if err != nil {
				return badInput(err)
			}
			for _, w := range b.warnings() {
				fmt.Fprintf(cmd.ErrOrStderr(), "board: warning: %s\n", w)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return badInput(fmt.Errorf("--addr: %w", err))
			}
			// Bound to another interface than loopback, the board is
			// served on purpose to other machines, under whatever names
			// (a domain, an mDNS name, a proxy's) they reach it by.
			if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
				b.anyHost = true
			}
			fmt.Fprintf(cmd.OutOrStdout(), "board: http://%s/ (%d runs; Ctrl-C to stop)\n", ln.Addr(), b.runCount())
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveBoard(ctx, ln, b)
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
	index int    // its place in board.runs, for the page
	name  string // its path relative to the directory given (boardRoot)
	dir   string // absolute, free of symbolic links

	// mu guards the fields below. It is never held across I/O: update
	// reads the file with it released and applies what it read under it.
	mu      sync.Mutex
	offset  int64
	lines   []json.RawMessage
	eval    map[string]any // the latest line with a valid_* field
	skipped int            // complete lines that are not JSON objects
	// file is metrics.jsonl as last read (its identity, for os.SameFile),
	// tail the bytes before offset (the end of the last line read): a file
	// replaced by another (a new inode) or rewritten in place (tail no
	// longer there) is read again from its start.
	file os.FileInfo
	tail []byte
	// gen counts the times the file was read again from its start; the
	// page sends it back (/api/metrics?gen=), so that it drops the lines
	// of an older file.
	gen int
	// version counts the updates applied, so that an update that read
	// while another applied its own is dropped rather than applied twice.
	version int
}

// boardRoot is a directory given on the command line, and the prefix of
// the names of the runs below it ("" when it is the only one).
type boardRoot struct {
	arg, dir, prefix string
}

// The bounds of the walk for runs below a given directory: how deep it
// goes, how many directories it reads (per given directory), and how many
// runs the board holds in all.
const (
	maxBoardDepth = 8
	maxBoardDirs  = 20000
	maxBoardRuns  = 200
	// boardRescan is how often /api/runs walks the directories again for
	// runs started since.
	boardRescan = 5 * time.Second
)

// board serves the runs below its roots (an http.Handler).
type board struct {
	roots   []boardRoot
	handler http.Handler
	// The bounds of the walk and how often it is repeated: the constants
	// above, smaller in tests.
	maxDepth, maxDirs, maxRuns int
	rescan                     time.Duration
	// anyHost lets requests name the board by any Host: set when it
	// listens on an interface other than loopback (boardHost).
	anyHost bool

	mu      sync.Mutex // guards the fields below
	runs    []*boardRun
	byDir   map[string]bool // the runs' directories
	names   map[string]int  // how many runs have been given a name
	warns   []string        // from the latest walk
	scanned time.Time       // when the latest walk started
}

// newBoardHandler returns the board over the runs at and below the
// directories, which must exist; see the board command's help for what
// is a run and how the walk is bounded.
func newBoardHandler(dirs []string) (*board, error) {
	b := &board{
		maxDepth: maxBoardDepth, maxDirs: maxBoardDirs, maxRuns: maxBoardRuns, rescan: boardRescan,
		byDir: map[string]bool{}, names: map[string]int{},
	}
	for _, d := range dirs {
		if d == "" { // filepath.Abs would make it the working directory
			return nil, errors.New(`board: "": give a directory`)
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		// A directory given as a link (checkpoints/latest) is its target;
		// links below it are not followed.
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
		root := boardRoot{arg: d, dir: abs}
		if len(dirs) > 1 {
			root.prefix = filepath.Base(abs)
		}
		b.roots = append(b.roots, root)
	}
	b.scan()
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
	mux.HandleFunc("GET /api/status", b.serveStatus)
	mux.HandleFunc("GET /api/metrics", b.serveMetrics)
	mux.HandleFunc("GET /api/image", b.serveImage)
	b.handler = b.securityHeaders(mux)
	return b, nil
}

// ServeHTTP implements http.Handler.
func (b *board) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.handler.ServeHTTP(w, r) }

// warnings are what the latest walk found wrong: a directory with no run
// below it, a bound reached.
func (b *board) warnings() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.warns)
}

// runCount is how many runs the board shows.
func (b *board) runCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.runs)
}

// isRunDir reports whether a directory's entries make it a run: a regular
// metrics.jsonl, config.yaml or checkpoint (best.ckpt, step-N.ckpt).
// Links do not count.
func isRunDir(entries []fs.DirEntry) bool {
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		switch n := e.Name(); {
		case n == train.MetricsFile, n == train.ConfigFile, n == train.BestCheckpoint:
			return true
		case strings.HasPrefix(n, "step-") && strings.HasSuffix(n, ".ckpt"):
			if _, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(n, "step-"), ".ckpt")); err == nil {
				return true
			}
		}
	}
	return false
}

// scan walks the roots for runs and adds those it has not seen, after
// the others, so that a run keeps its index and name. The walk reads
// directories only: no symbolic link is followed (a link to a directory
// is not a directory to os.ReadDir), hidden directories (.git) are
// skipped, and the bounds cut it short with a warning.
func (b *board) scan() {
	b.mu.Lock()
	b.scanned = time.Now()
	b.mu.Unlock()
	var warns []string
	for _, root := range b.roots {
		found, visited := 0, 0
		var full, tooMany, tooDeep bool
		var walk func(dir, rel string, depth int)
		walk = func(dir, rel string, depth int) {
			if full || tooMany {
				return
			}
			if visited >= b.maxDirs {
				tooMany = true
				return
			}
			visited++
			entries, err := os.ReadDir(dir)
			if err != nil {
				return
			}
			if isRunDir(entries) {
				found++
				if !b.addRun(root, dir, rel) {
					full = true
					return
				}
			}
			for _, e := range entries {
				if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
					continue
				}
				if depth == b.maxDepth {
					tooDeep = true
					continue
				}
				walk(filepath.Join(dir, e.Name()), path.Join(rel, e.Name()), depth+1)
			}
		}
		walk(root.dir, ".", 0)
		if found == 0 && !full {
			warns = append(warns, fmt.Sprintf("no run in %s: no directory at or below it holds %s, %s or a checkpoint (the board shows runs as they appear)",
				root.arg, train.MetricsFile, train.ConfigFile))
		}
		if full {
			warns = append(warns, fmt.Sprintf("the board shows at most %d runs; runs below %s beyond them are left out", b.maxRuns, root.arg))
		}
		if tooMany {
			warns = append(warns, fmt.Sprintf("stopped looking for runs below %s after %d directories; give a directory nearer the runs", root.arg, b.maxDirs))
		}
		if tooDeep {
			warns = append(warns, fmt.Sprintf("directories more than %d levels below %s were not searched for runs", b.maxDepth, root.arg))
		}
	}
	b.mu.Lock()
	b.warns = warns
	b.mu.Unlock()
}

// addRun adds the run in dir, rel below root, unless the board has it;
// it reports false when the board is full.
func (b *board) addRun(root boardRoot, dir, rel string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byDir[dir] {
		return true
	}
	if len(b.runs) >= b.maxRuns {
		return false
	}
	name := rel
	switch {
	case rel == ".":
		name = filepath.Base(dir)
	case root.prefix != "":
		name = root.prefix + "/" + rel
	}
	b.names[name]++
	if n := b.names[name]; n > 1 {
		name = fmt.Sprintf("%s (%d)", name, n)
	}
	b.byDir[dir] = true
	b.runs = append(b.runs, &boardRun{index: len(b.runs), name: name, dir: dir})
	return true
}

// current is the board's runs, after a new walk if the last is older
// than b.rescan (one walk at a time: the first request to find it stale
// walks, the others meanwhile answer with the runs known).
func (b *board) current() []*boardRun {
	b.mu.Lock()
	stale := time.Since(b.scanned) >= b.rescan
	if stale {
		b.scanned = time.Now()
	}
	b.mu.Unlock()
	if stale {
		b.scan()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.runs)
}

func (b *board) securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !b.anyHost && !boardHost(r.Host) {
			http.Error(w, "board: Host "+strconv.Quote(r.Host)+" refused: open the board by IP address, localhost or this machine's name", http.StatusForbidden)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self'; style-src 'self' 'unsafe-inline'")
		h.ServeHTTP(w, r)
	})
}

// boardHost reports whether a request's Host may reach the board: an IP
// address, localhost or this machine's host name. A page of another
// site whose name was made to resolve to 127.0.0.1 (DNS rebinding)
// names its own host, and would otherwise read the runs as the board's
// own page does.
func boardHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	name, err := os.Hostname()
	return err == nil && name != "" && strings.EqualFold(host, name)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

// run returns the run the query's run parameter indexes, or writes a 404.
func (b *board) run(w http.ResponseWriter, r *http.Request) *boardRun {
	i, err := strconv.Atoi(r.URL.Query().Get("run"))
	b.mu.Lock()
	defer b.mu.Unlock()
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

// maxBoardTail is how many bytes before the offset update checks to
// notice a metrics.jsonl rewritten in place.
const maxBoardTail = 256

// openRegularIn opens name inside dir (os.Root: no link out of it is
// followed) for reading, if it is a regular file. The open does not
// block: it is non-blocking, so that a named pipe (FIFO) opens at once
// rather than waiting for a writer, and the open file's fstat then
// refuses it, as anything that is not a regular file (a device, a
// directory). The board never reads a file that can block.
func openRegularIn(dir, name string) (*os.File, os.FileInfo, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: not a regular file (%s)", filepath.Join(dir, name), st.Mode().Type())
	}
	return f, st, nil
}

// update reads the lines appended to metrics.jsonl since the last call.
// Only complete lines count: a partially written last line waits for its
// newline. A file that is not the one read before (replaced: another
// inode), is shorter than what was read, or no longer holds what was
// read before the offset (rewritten in place) is read again from its
// start. A metrics.jsonl that is not a regular file (a FIFO) is not read.
// The run's lock is held only to copy its state and to apply what was
// read, never while the file is opened or read.
func (run *boardRun) update() {
	run.mu.Lock()
	offset, seen, tail, version := run.offset, run.file, run.tail, run.version
	run.mu.Unlock()

	f, st, err := openRegularIn(run.dir, train.MetricsFile)
	if err != nil {
		return
	}
	defer f.Close()
	reset := (seen != nil && !os.SameFile(seen, st)) || st.Size() < offset
	if !reset && len(tail) > 0 {
		got := make([]byte, len(tail))
		if _, err := f.ReadAt(got, offset-int64(len(tail))); err != nil || !bytes.Equal(got, tail) {
			reset = true
		}
	}
	if reset {
		offset = 0
	}
	var data []byte
	if st.Size() > offset {
		if data, err = io.ReadAll(io.NewSectionReader(f, offset, st.Size()-offset)); err != nil {
			return
		}
	}
	end := bytes.LastIndexByte(data, '\n')
	var lines []json.RawMessage
	var eval map[string]any
	skipped := 0
	if end >= 0 {
		for _, line := range bytes.Split(data[:end], []byte("\n")) {
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			var fields map[string]any
			if err := json.Unmarshal(line, &fields); err != nil {
				skipped++
				continue
			}
			lines = append(lines, json.RawMessage(slices.Clone(line)))
			for k := range fields {
				if strings.HasPrefix(k, "valid_") {
					eval = fields
					break
				}
			}
		}
	}

	run.mu.Lock()
	defer run.mu.Unlock()
	if run.version != version {
		return // another update applied meanwhile; the next poll reads on
	}
	run.version++
	if reset {
		run.offset, run.lines, run.eval, run.skipped, run.tail = 0, nil, nil, 0, nil
		run.gen++
	}
	run.file = st
	if end < 0 {
		return
	}
	run.lines = append(run.lines, lines...)
	run.skipped += skipped
	if eval != nil {
		run.eval = eval
	}
	run.offset += int64(end + 1)
	// The tail: the last bytes read, up to the offset.
	run.tail = slices.Clone(data[max(0, end+1-maxBoardTail) : end+1])
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

// serveRuns answers /api/runs with every run: its name, config, latest
// evaluation and images. It walks the directories again for new runs when
// the last walk is older than b.rescan.
func (b *board) serveRuns(w http.ResponseWriter, r *http.Request) {
	out := []boardRunInfo{}
	for _, run := range b.current() {
		run.update()
		info := boardRunInfo{Index: run.index, Name: run.name, Dir: run.dir, Images: run.images()}
		if f, _, err := openRegularIn(run.dir, train.ConfigFile); err == nil {
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

// boardStatus is /api/status: the directories given and the warnings of
// the latest walk.
type boardStatus struct {
	Dirs     []string `json:"dirs"`
	Runs     int      `json:"runs"`
	Warnings []string `json:"warnings"`
}

func (b *board) serveStatus(w http.ResponseWriter, r *http.Request) {
	st := boardStatus{Dirs: []string{}, Warnings: b.warnings(), Runs: b.runCount()}
	for _, root := range b.roots {
		st.Dirs = append(st.Dirs, root.dir)
	}
	if st.Warnings == nil {
		st.Warnings = []string{}
	}
	writeJSON(w, st)
}

// serveMetrics answers /api/metrics?run=I&since=N&gen=G with the run's
// metric lines from the N-th on, the total count and the file's
// generation, so a client polls only for what it has not seen; a client
// whose G is not the current generation (the file was replaced or
// rewritten since) gets every line from the first (since 0).
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
	gen, hasGen := -1, false
	if g := r.URL.Query().Get("gen"); g != "" {
		n, err := strconv.Atoi(g)
		if err != nil {
			http.Error(w, "bad gen", http.StatusBadRequest)
			return
		}
		gen, hasGen = n, true
	}
	run.update()
	run.mu.Lock()
	total, current := len(run.lines), run.gen
	// A client ahead of the file (rewritten shorter), or whose lines are
	// of a file read before (replaced or rewritten), starts again.
	if since > total || hasGen && gen != current {
		since = 0
	}
	lines := slices.Clone(run.lines[since:])
	run.mu.Unlock()
	if lines == nil {
		lines = []json.RawMessage{}
	}
	writeJSON(w, struct {
		Run   int               `json:"run"`
		Gen   int               `json:"gen"`
		Since int               `json:"since"`
		Total int               `json:"total"`
		Lines []json.RawMessage `json:"lines"`
	}{run.index, current, since, total, lines})
}

// serveImage answers /api/image?run=I&name=N with the PNG named N in the
// run's listing; the file opened is the listing's, never a path built
// from the request, and it is opened inside the run directory
// (os.OpenInRoot): a file swapped for a link out of it since the listing
// is not followed.
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
	f, st, err := openRegularIn(run.dir, filepath.FromSlash(listing[i].Name))
	if err != nil {
		http.Error(w, "no such image", http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "image/png")
	http.ServeContent(w, r, "", st.ModTime(), f)
}
