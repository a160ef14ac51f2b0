package fileio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotRegular is matched (with errors.Is) by every error that refuses a
// path because something other than a regular file is there: a directory,
// a named pipe, a device, a socket. Such a path is the user's input, never
// a fault of the program.
var ErrNotRegular = errors.New("not a regular file")

// NotRegularError refuses to read or replace a path that holds something
// other than a regular file. errors.Is(err, ErrNotRegular) reports it.
type NotRegularError struct {
	Path   string      // the path as the caller gave it
	Target string      // where the symbolic link at Path leads; "" when Path is no link
	Mode   fs.FileMode // the mode of what was found
}

// Error describes what is at the path, for a caller that names the path
// itself ("write out.bin: a named pipe (FIFO), not a regular file").
func (e *NotRegularError) Error() string {
	if e.Target != "" && e.Target != e.Path {
		return fmt.Sprintf("a symbolic link to %s, which is %s, not a regular file", e.Target, fileKind(e.Mode))
	}
	return fileKind(e.Mode) + ", not a regular file"
}

// Is makes errors.Is(err, ErrNotRegular) true.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// fileKind names the type of a file mode, with its article.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsRegular():
		return "a regular file"
	}
	return fmt.Sprintf("a special file (mode %v)", m)
}

// maxSymlinks bounds the chain of symbolic links WriteFileAtomic follows,
// as the kernel's own limit (40 on Linux) does for open.
const maxSymlinks = 40

// WriteFileAtomic replaces the file at path with the bytes that write
// produces, so that a crash at any moment leaves either the old file or the
// complete new one, never a truncated mix.
//
// Only a regular file is ever replaced. If path exists and is a directory,
// a named pipe, a device or a socket, nothing is written and the error, a
// *NotRegularError naming path, matches ErrNotRegular: `--out /dev/full` or
// `--out /tmp` must fail, not turn a device node or a directory entry into a
// regular file.
//
// A symbolic link is followed, as os.WriteFile would follow it: the file it
// resolves to (through any chain of links) is replaced atomically and the
// link itself is left in place. A link to a special file is refused like the
// special file; a dangling link creates its target. The check happens before
// the rename, so a special file put at the path in between is not detected.
//
// The bytes go through a buffered writer into a temporary file created in the
// same directory as the file replaced (a rename is only atomic within one file
// system). The temporary file is flushed, fsynced, closed, given mode 0644 and
// renamed over that file; the directory is then fsynced so that the rename
// itself survives a power loss. On any error, including a panic inside write,
// the temporary file is removed and the old file is left untouched. The
// returned error names path and wraps the cause; it never shows the
// temporary file's name.
func WriteFileAtomic(path string, write func(w io.Writer) error) error {
	if path == "" {
		return errors.New("write: empty path")
	}
	target, err := writeTarget(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	dir, base := splitPath(target)
	if dir == "" {
		dir = "." // not CreateTemp's default, the system's temporary directory
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: create a file in %s: %w", path, dir, bareError(err))
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if !renamed {
			// Close may already have happened; its second error is moot.
			f.Close()
			os.Remove(tmp)
		}
	}()

	bw := bufio.NewWriter(tempWriter{f})
	if err := write(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: chmod: %w", path, bareError(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, bareError(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", path, bareError(err))
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("write %s: rename: %w", path, bareError(err))
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}

// writeTarget returns the file WriteFileAtomic replaces for path: path
// itself, or the end of the chain of symbolic links that starts there. The
// target need not exist; if it does and is not a regular file, the error is
// a *NotRegularError.
func writeTarget(path string) (string, error) {
	p := path
	for range maxSymlinks {
		info, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return p, nil // created; a missing directory fails at CreateTemp
		case err != nil:
			return "", err
		case info.Mode()&fs.ModeSymlink != 0:
			dest, err := os.Readlink(p)
			if err != nil {
				return "", err
			}
			if !filepath.IsAbs(dest) {
				// Relative to the link's directory. Nothing is cleaned:
				// "dir/link/../x" is for the kernel to resolve, ".." after
				// a link to a directory meaning that directory's parent.
				dir, _ := splitPath(p)
				dest = dir + dest
			}
			p = dest
		case !info.Mode().IsRegular():
			e := &NotRegularError{Path: path, Mode: info.Mode()}
			if p != path {
				e.Target = p
			}
			return "", e
		default:
			return p, nil
		}
	}
	return "", &fs.PathError{Op: "follow symbolic links", Path: path, Err: syscall.ELOOP}
}

// splitPath splits p after its last separator into a directory, which
// keeps that separator ("" for none), and a name. Unlike filepath.Split and
// filepath.Dir it never cleans: in "a/link/../b" the ".." must apply to
// where the link leads, which only the kernel knows.
func splitPath(p string) (dir, name string) {
	i := len(p) - 1
	for i >= 0 && !os.IsPathSeparator(p[i]) {
		i--
	}
	return p[:i+1], p[i+1:]
}

// tempWriter writes to the temporary file, reporting an error without the
// file's name: the user knows the path they gave, not the temporary one.
type tempWriter struct{ f *os.File }

func (w tempWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	return n, bareError(err)
}

// bareError strips the file names from a *fs.PathError or *os.LinkError,
// keeping the cause (so errors.Is(err, fs.ErrNotExist) still holds). Other
// errors, and nil, are returned as they are.
func bareError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// syncDir fsyncs the directory dir so that entries renamed into it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// OpenRegular opens path for reading if it is a regular file (a symbolic
// link is followed) and returns the file and its size. Anything else is
// refused with a *NotRegularError before any byte is read: stat comes
// first, so that a device is not even opened, and the open is non-blocking,
// so that a named pipe put at the path in between cannot hang the caller
// (the second stat, of the open file, refuses it). The error does not name
// path; the caller does.
func OpenRegular(path string) (*os.File, int64, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, 0, bareError(err)
	}
	if !info.Mode().IsRegular() {
		return nil, 0, &NotRegularError{Path: path, Mode: info.Mode()}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, bareError(err)
	}
	if info, err = f.Stat(); err != nil {
		f.Close()
		return nil, 0, bareError(err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, 0, &NotRegularError{Path: path, Mode: info.Mode()}
	}
	return f, info.Size(), nil
}
