package api

// VideoTypes are the values virtstation.io/video accepts: the video models
// KubeVirt passes to QEMU on amd64, the widest set. Arch.VideoTypes says
// which of them each architecture takes.
var VideoTypes = []string{"bochs", "cirrus", "ramfb", "vga", "virtio"}
