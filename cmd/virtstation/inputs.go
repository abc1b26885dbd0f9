package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/virtstation/virtstation/render"
)

// fileExtensions are the files -f takes from a directory, as kubectl's
// --filename does: others are skipped (a file named itself is read
// whatever its name).
var fileExtensions = []string{"json", "yaml", "yml"}

// stdinName is how warnings and errors name the input read from stdin (-).
const stdinName = "stdin"

// inputReader reads the objects of -f and --objects, kubectl's way: each
// value a file, a directory or - (stdin, once), and collects the warnings
// about what it read.
type inputReader struct {
	stdin io.Reader
	// recursive is -R: descend into directories.
	recursive bool
	// namespace names the objects that set none in warnings.
	namespace string
	// stdinRead is set once - has been read.
	stdinRead bool
	// warnings are about the input: keys given twice, unknown keys.
	warnings []string
}

// read reads the objects of every path in order.
func (r *inputReader) read(paths []string) ([]render.Object, error) {
	var out []render.Object
	for _, p := range paths {
		files, err := r.expand(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			objs, err := r.readFile(f)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}

// expand turns one -f value into the files to read, in lexical order: the
// file itself, or a directory's files with fileExtensions (its own, or with
// -R every one below it).
func (r *inputReader) expand(path string) ([]string, error) {
	if path == "-" {
		return []string{path}, nil
	}
	info, err := os.Stat(path)
	if err != nil || !info.IsDir() {
		// A file, or an error that reading it reports.
		return []string{path}, nil
	}
	var files []string
	// The root is walked through its separator, so that a symlink to a
	// directory given on the command line is followed as kubectl does.
	root := strings.TrimSuffix(path, string(filepath.Separator)) + string(filepath.Separator)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != root && !r.recursive:
			return filepath.SkipDir
		case d.IsDir() || !slices.Contains(fileExtensions, strings.TrimPrefix(filepath.Ext(p), ".")):
		case !d.Type().IsRegular():
			// A link (or device, or pipe) inside the directory may lead out
			// of it, to a kubeconfig that render would print: named files
			// only.
			r.warnings = append(r.warnings, fmt.Sprintf("%s: skipped: not a regular file (name it with -f to read it)", p))
		default:
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(files) == 0 {
		hint := ""
		if !r.recursive {
			hint = " (add -R to descend into its directories)"
		}
		return nil, fmt.Errorf("%s: no .json, .yaml or .yml files in the directory%s", path, hint)
	}
	return files, nil
}

// readFile reads one file (or stdin for -), warns of duplicate and unknown
// keys, and returns its objects.
func (r *inputReader) readFile(path string) ([]render.Object, error) {
	name, data, err := r.load(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r.warnings = append(r.warnings, duplicateKeyWarnings(name, data)...)
	objs, err := render.ReadObjects(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, o := range objs {
		r.warnings = append(r.warnings, unknownKeyWarnings(name, o, r.namespace)...)
	}
	return objs, nil
}

// load reads the file, or stdin for -, and returns the name to report it by.
func (r *inputReader) load(path string) (string, []byte, error) {
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return path, nil, err
		}
		defer func() { _ = f.Close() }()
		b, err := readLimited(f)
		return path, b, err
	}
	if r.stdinRead {
		return stdinName, nil, errors.New("- (stdin) given more than once: stdin can be read once")
	}
	r.stdinRead = true
	b, err := readLimited(r.stdin)
	return stdinName, b, err
}

// maxInputBytes bounds one input file (or stdin): it is read whole, for the
// duplicate-key check, before render's per-document limit applies.
const maxInputBytes = 64 << 20

// readLimited reads all of in, or fails past maxInputBytes.
func readLimited(in io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(in, maxInputBytes+1))
	if err == nil && len(b) > maxInputBytes {
		return nil, fmt.Errorf("larger than %d MiB: split it into several files", maxInputBytes>>20)
	}
	return b, err
}
