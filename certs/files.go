package certs

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The cert-dir layout is the kubelet's for Secret volumes: tls.crt and
// tls.key are symlinks into ..data, itself a symlink to a directory holding
// one consistent pair. A new pair is written into a fresh directory and
// ..data is renamed over in one step, so a reader (controller-runtime's
// certwatcher reads the two files one after the other) never sees a new
// certificate with an old key. Removing the old directory deletes the
// inodes certwatcher watches, which makes it re-read at once.
const (
	dataLink      = "..data"
	dataLinkTmp   = "..data_tmp"
	payloadPrefix = "..certs_"
)

// fileModes: the key is private to the webhook's user.
var fileModes = map[string]fs.FileMode{SecretKeyServingCert: 0o644, SecretKeyServingKey: 0o600}

// writePair atomically replaces tls.crt and tls.key in dir.
func writePair(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create cert dir: %w", err)
	}
	payload, err := os.MkdirTemp(dir, payloadPrefix)
	if err != nil {
		return fmt.Errorf("create cert payload dir: %w", err)
	}
	files := map[string][]byte{SecretKeyServingCert: certPEM, SecretKeyServingKey: keyPEM}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(payload, name), data, fileModes[name]); err != nil {
			return errors.Join(fmt.Errorf("write %s: %w", name, err), os.RemoveAll(payload))
		}
	}
	if err := os.Chmod(payload, 0o755); err != nil { // MkdirTemp makes it 0700
		return errors.Join(fmt.Errorf("chmod cert payload dir: %w", err), os.RemoveAll(payload))
	}
	if err := swapSymlink(filepath.Join(dir, dataLink), filepath.Join(dir, dataLinkTmp), filepath.Base(payload)); err != nil {
		return errors.Join(err, os.RemoveAll(payload))
	}
	for name := range files {
		link := filepath.Join(dir, name)
		want := filepath.Join(dataLink, name)
		if t, err := os.Readlink(link); err == nil && t == want {
			continue
		}
		if err := swapSymlink(link, link+".tmp-link", want); err != nil {
			return err
		}
	}
	return removeStalePayloads(dir, filepath.Base(payload))
}

// swapSymlink points link at target by renaming a new symlink tmp over it.
func swapSymlink(link, tmp, target string) error {
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("symlink %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, link); err != nil {
		return fmt.Errorf("replace %s: %w", link, err)
	}
	return nil
}

// removeStalePayloads deletes every payload directory but current: the one
// just replaced, and any left by an interrupted write.
func removeStalePayloads(dir, current string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read cert dir: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), payloadPrefix) && e.Name() != current {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// pairOnDisk reports whether dir already serves exactly certPEM and keyPEM.
func pairOnDisk(dir string, certPEM, keyPEM []byte) bool {
	c, err := os.ReadFile(filepath.Join(dir, SecretKeyServingCert))
	if err != nil || !bytes.Equal(c, certPEM) {
		return false
	}
	k, err := os.ReadFile(filepath.Join(dir, SecretKeyServingKey))
	return err == nil && bytes.Equal(k, keyPEM)
}

// readPair reads tls.crt and tls.key from dir and parses them.
func readPair(dir string) (*keyPair, error) {
	c, err := os.ReadFile(filepath.Join(dir, SecretKeyServingCert))
	if err != nil {
		return nil, err
	}
	k, err := os.ReadFile(filepath.Join(dir, SecretKeyServingKey))
	if err != nil {
		return nil, err
	}
	return parseKeyPair(c, k)
}
