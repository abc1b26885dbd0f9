package virtlauncher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// ImageEnv names the guest image's directory; make test sets it.
const ImageEnv = "VIRTSTATION_GUEST_IMAGE"

// RootLabel is the guest image's root filesystem label (hack/guest-image.sh).
const RootLabel = "vsroot"

// Image is the Debian guest hack/guest-image.sh builds.
type Image struct {
	Kernel, Initrd string
	// Root is the root filesystem (ext4, label RootLabel), never written:
	// boots run on a snapshot of it.
	Root string
}

// ImageIn is the image in directory dir.
func ImageIn(dir string) Image {
	return Image{Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img"), Root: filepath.Join(dir, "root.ext4")}
}

var (
	imageOnce sync.Once
	image     Image
	imageErr  error
)

// FindImage is the image in $VIRTSTATION_GUEST_IMAGE, or the one
// hack/guest-image.sh prints after building it once per machine (about 5
// minutes; its progress goes to stderr).
func FindImage() (Image, error) {
	imageOnce.Do(func() { image, imageErr = findImage() })
	return image, imageErr
}

func findImage() (Image, error) {
	dir := os.Getenv(ImageEnv)
	if dir == "" {
		_, self, _, ok := runtime.Caller(0)
		if !ok {
			return Image{}, errors.New("virtlauncher: cannot locate the repository; set " + ImageEnv + " (make test does)")
		}
		script := filepath.Join(filepath.Dir(self), "..", "..", "hack", "guest-image.sh")
		cmd := exec.Command(script)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return Image{}, fmt.Errorf("build the guest image with %s (or set %s; make test does): %w", script, ImageEnv, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	img := ImageIn(dir)
	for _, f := range []string{img.Kernel, img.Initrd, img.Root} {
		if _, err := os.Stat(f); err != nil {
			return Image{}, fmt.Errorf("virtlauncher: guest image in %s is incomplete (rebuild with hack/guest-image.sh): %w", dir, err)
		}
	}
	return img, nil
}
