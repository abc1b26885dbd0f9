package api

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// GPURequest is one entry of virtstation.io/gpus.
type GPURequest struct {
	// DeviceName is the device plugin's resource name, e.g. nvidia.com/GH100_H200.
	DeviceName string
	// Count is how many of them, 1 to MaxGPUs.
	Count int
}

// ParseGPUs parses virtstation.io/gpus: "deviceName=count[,deviceName=count]".
// A device name is a qualified resource name (vendor.com/model); each may
// appear once. The value is at most MaxAnnotationBytes long and asks for at
// most MaxGPUs GPUs in all; both are checked before the entries are parsed.
func ParseGPUs(value string, fld *field.Path) ([]GPURequest, field.ErrorList) {
	if len(value) > MaxAnnotationBytes {
		return nil, field.ErrorList{field.TooLong(fld, "", MaxAnnotationBytes)}
	}
	v := strings.TrimSpace(value)
	if v == "" {
		return nil, nil
	}
	// Each entry asks for at least one GPU.
	if n := strings.Count(v, ",") + 1; n > MaxGPUs {
		return nil, field.ErrorList{field.TooMany(fld, n, MaxGPUs)}
	}
	var out []GPURequest
	var errs field.ErrorList
	seen := sets.New[string]()
	total := 0
	for i, entry := range strings.Split(v, ",") {
		name, count, ok := strings.Cut(strings.TrimSpace(entry), "=")
		name, count = strings.TrimSpace(name), strings.TrimSpace(count)
		if !ok {
			count = "1"
		}
		f := fld.Index(i)
		if msgs := validation.IsQualifiedName(name); len(msgs) > 0 || !strings.Contains(name, "/") {
			errs = append(errs, field.Invalid(f, entry, "want deviceName=count with a device plugin resource name such as nvidia.com/GH100_H200=1"))
			continue
		}
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 || n > MaxGPUs {
			errs = append(errs, field.Invalid(f, entry, fmt.Sprintf("count must be a whole number from 1 to %d", MaxGPUs)))
			continue
		}
		if seen.Has(name) {
			errs = append(errs, field.Duplicate(f, name))
			continue
		}
		seen.Insert(name)
		total += n
		out = append(out, GPURequest{DeviceName: name, Count: n})
	}
	if len(errs) == 0 && total > MaxGPUs {
		errs = append(errs, field.Invalid(fld, value, fmt.Sprintf("asks for %d GPUs in all, more than the %d one VM may have", total, MaxGPUs)))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}
