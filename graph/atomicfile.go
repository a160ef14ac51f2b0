package graph

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces the file at path with the bytes that write
// produces, so that a crash at any moment leaves either the old file or the
// complete new one, never a truncated mix.
//
// The bytes go through a buffered writer into a temporary file created in the
// same directory as path (a rename is only atomic within one file system).
// The temporary file is flushed, fsynced, closed, given mode 0644 and renamed
// over path; the directory is then fsynced so that the rename itself survives
// a power loss. On any error, including a panic inside write, the temporary
// file is removed and the old file at path is left untouched; the returned
// error names path and wraps the cause.
//
// If path is a symbolic link, the link itself is replaced, not its target.
func WriteFileAtomic(path string, write func(w io.Writer) error) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
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

	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: close: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
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
