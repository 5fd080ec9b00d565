package nvmlclient // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// This file is the one place where NVML return codes are interpreted. Codes are compared
// as values, never through their strings: once the library is loaded, nvml.Return.Error()
// calls into libnvidia-ml, and after a failed Init or a Shutdown that is not safe.

// returnNames gives each code a stable name for logs and metric attributes.
var returnNames = map[nvml.Return]string{
	nvml.SUCCESS:                         "SUCCESS",
	nvml.ERROR_UNINITIALIZED:             "ERROR_UNINITIALIZED",
	nvml.ERROR_INVALID_ARGUMENT:          "ERROR_INVALID_ARGUMENT",
	nvml.ERROR_NOT_SUPPORTED:             "ERROR_NOT_SUPPORTED",
	nvml.ERROR_NO_PERMISSION:             "ERROR_NO_PERMISSION",
	nvml.ERROR_ALREADY_INITIALIZED:       "ERROR_ALREADY_INITIALIZED",
	nvml.ERROR_NOT_FOUND:                 "ERROR_NOT_FOUND",
	nvml.ERROR_INSUFFICIENT_SIZE:         "ERROR_INSUFFICIENT_SIZE",
	nvml.ERROR_INSUFFICIENT_POWER:        "ERROR_INSUFFICIENT_POWER",
	nvml.ERROR_DRIVER_NOT_LOADED:         "ERROR_DRIVER_NOT_LOADED",
	nvml.ERROR_TIMEOUT:                   "ERROR_TIMEOUT",
	nvml.ERROR_IRQ_ISSUE:                 "ERROR_IRQ_ISSUE",
	nvml.ERROR_LIBRARY_NOT_FOUND:         "ERROR_LIBRARY_NOT_FOUND",
	nvml.ERROR_FUNCTION_NOT_FOUND:        "ERROR_FUNCTION_NOT_FOUND",
	nvml.ERROR_CORRUPTED_INFOROM:         "ERROR_CORRUPTED_INFOROM",
	nvml.ERROR_GPU_IS_LOST:               "ERROR_GPU_IS_LOST",
	nvml.ERROR_RESET_REQUIRED:            "ERROR_RESET_REQUIRED",
	nvml.ERROR_OPERATING_SYSTEM:          "ERROR_OPERATING_SYSTEM",
	nvml.ERROR_LIB_RM_VERSION_MISMATCH:   "ERROR_LIB_RM_VERSION_MISMATCH",
	nvml.ERROR_IN_USE:                    "ERROR_IN_USE",
	nvml.ERROR_MEMORY:                    "ERROR_MEMORY",
	nvml.ERROR_NO_DATA:                   "ERROR_NO_DATA",
	nvml.ERROR_INSUFFICIENT_RESOURCES:    "ERROR_INSUFFICIENT_RESOURCES",
	nvml.ERROR_ARGUMENT_VERSION_MISMATCH: "ERROR_ARGUMENT_VERSION_MISMATCH",
	nvml.ERROR_DEPRECATED:                "ERROR_DEPRECATED",
	nvml.ERROR_NOT_READY:                 "ERROR_NOT_READY",
	nvml.ERROR_GPU_NOT_FOUND:             "ERROR_GPU_NOT_FOUND",
	nvml.ERROR_INVALID_STATE:             "ERROR_INVALID_STATE",
	nvml.ERROR_UNKNOWN:                   "ERROR_UNKNOWN",
}

// ReturnName is the constant name of an NVML return code, e.g. "ERROR_GPU_IS_LOST".
func ReturnName(r nvml.Return) string {
	if name, ok := returnNames[r]; ok {
		return name
	}
	return fmt.Sprintf("NVML_RETURN_%d", int32(r))
}

// IsDeviceGone reports whether the code means the whole device stopped answering: the
// device is skipped for the rest of the scrape and counted as failed.
func IsDeviceGone(r nvml.Return) bool {
	return r == nvml.ERROR_GPU_IS_LOST || r == nvml.ERROR_GPU_NOT_FOUND || r == nvml.ERROR_RESET_REQUIRED
}

// IsNoData reports whether the code is a normal "this device does not offer that value"
// answer: the metric is skipped quietly.
func IsNoData(r nvml.Return) bool {
	switch r {
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NO_PERMISSION, nvml.ERROR_NOT_FOUND,
		nvml.ERROR_NO_DATA, nvml.ERROR_FUNCTION_NOT_FOUND:
		return true
	}
	return false
}

// Error wraps a failed NVML call with the call's name. errors.Is(err, nvml.ERROR_…) works on it.
type Error struct {
	Call   string
	Return nvml.Return
}

func (e *Error) Error() string { return e.Call + ": " + ReturnName(e.Return) }

func (e *Error) Unwrap() error { return e.Return }

// NewError returns nil for SUCCESS and an *Error otherwise.
func NewError(call string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return &Error{Call: call, Return: r}
}

// ReturnOf extracts the NVML return code from an error chain (SUCCESS for nil, UNKNOWN when
// the error did not come from NVML).
func ReturnOf(err error) nvml.Return {
	if err == nil {
		return nvml.SUCCESS
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Return
	}
	var r nvml.Return
	if errors.As(err, &r) {
		return r
	}
	return nvml.ERROR_UNKNOWN
}
