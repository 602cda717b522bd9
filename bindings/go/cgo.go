package pccl

/*
#include <stdlib.h>
#include <string.h>
#include "pccl.h"
*/
import "C"

import (
	"sync"
	"unsafe"
)

// The compiler and linker flags come from cgo_pkgconfig.go (default: pkg-config
// pccl, i.e. an installed libpccl) or cgo_nopkgconfig.go (build tag
// pccl_no_pkgconfig: the repository's include/ and -lpccl from the directory
// given in CGO_LDFLAGS="-L<dir> -Wl,-rpath,<dir>"); see docs/go.md and test.sh.

var (
	initOnce sync.Once
	initErr  error
)

// Init initializes libpccl (pcclInit). It is idempotent and safe from any
// goroutine; NewCommunicator calls it.
func Init() error {
	initOnce.Do(func() { initErr = newErr("Init", Code(C.pcclInit())) })
	return initErr
}

// Version returns the runtime version of libpccl as (major, minor, patch).
func Version() (major, minor, patch int, err error) {
	var v C.uint32_t
	if r := Code(C.pcclGetVersion(&v)); r != Success {
		return 0, 0, 0, newErr("Version", r)
	}
	return int(v>>16) & 0xff, int(v>>8) & 0xff, int(v) & 0xff, nil
}

// HeaderVersion is the version of include/pccl.h this package was built with.
const HeaderVersion = (int(C.PCCL_VERSION_MAJOR) << 16) | (int(C.PCCL_VERSION_MINOR) << 8) |
	int(C.PCCL_VERSION_PATCH)

// BuildInfo describes build-time features of libpccl.
type BuildInfo struct {
	HasCUDASupport bool
}

// GetBuildInfo returns the build-time features of libpccl (pcclGetBuildInfo).
func GetBuildInfo() (BuildInfo, error) {
	var bi C.pcclBuildInfo_t
	if r := Code(C.pcclGetBuildInfo(&bi)); r != Success {
		return BuildInfo{}, newErr("GetBuildInfo", r)
	}
	return BuildInfo{HasCUDASupport: bool(bi.has_cuda_support)}, nil
}

// cAlloc returns n zeroed bytes of C memory (never Go memory: the library
// may keep using it after a call returns). n must be > 0.
func cAlloc(n uintptr) unsafe.Pointer {
	p := C.calloc(C.size_t(n), 1)
	if p == nil {
		panic("pccl: out of C memory")
	}
	return p
}

func cFree(p unsafe.Pointer) { C.free(p) }

// cCopy copies n bytes (memmove semantics not needed: distinct buffers).
func cCopy(dst, src unsafe.Pointer, n uintptr) {
	if n > 0 {
		C.memcpy(dst, src, C.size_t(n))
	}
}

// headerCodes returns the header's values for the Go constants, for the tests.
func headerCodes() map[string]int {
	return map[string]int{
		"pcclSuccess": int(C.pcclSuccess), "pcclNotInitialized": int(C.pcclNotInitialized),
		"pcclInternalError": int(C.pcclInternalError), "pcclInvalidArgument": int(C.pcclInvalidArgument),
		"pcclInvalidUsage": int(C.pcclInvalidUsage), "pcclTooFewPeers": int(C.pcclTooFewPeers),
		"pcclMasterConnectionFailed":     int(C.pcclMasterConnectionFailed),
		"pcclRankConnectionFailed":       int(C.pcclRankConnectionFailed),
		"pcclRankConnectionLost":         int(C.pcclRankConnectionLost),
		"pcclNoSharedStateAvailable":     int(C.pcclNoSharedStateAvailable),
		"pcclPendingAsyncOps":            int(C.pcclPendingAsyncOps),
		"pcclUpdateTopologyFailed":       int(C.pcclUpdateTopologyFailed),
		"pcclTopologyOptimizationFailed": int(C.pcclTopologyOptimizationFailed),
		"pcclTimeout":                    int(C.pcclTimeout), "pcclSystemError": int(C.pcclSystemError),
		"pcclRemoteError": int(C.pcclRemoteError), "pcclSharedStateSyncFailed": int(C.pcclSharedStateSyncFailed),
		"pcclProtocolError": int(C.pcclProtocolError), "PCCL_RESULT_COUNT": int(C.PCCL_RESULT_COUNT),
		"pcclAuthenticationFailed": int(C.pcclAuthenticationFailed), "pcclUint8": int(C.pcclUint8),
		"pcclInt8": int(C.pcclInt8), "pcclInt16": int(C.pcclInt16),
		"pcclUint16": int(C.pcclUint16), "pcclUint32": int(C.pcclUint32), "pcclInt32": int(C.pcclInt32),
		"pcclUint64": int(C.pcclUint64), "pcclInt64": int(C.pcclInt64), "pcclFloat16": int(C.pcclFloat16),
		"pcclBFloat16": int(C.pcclBFloat16), "pcclFloat": int(C.pcclFloat), "pcclDouble": int(C.pcclDouble),
		"pcclSum": int(C.pcclSum), "pcclAvg": int(C.pcclAvg), "pcclProd": int(C.pcclProd),
		"pcclMax": int(C.pcclMax), "pcclMin": int(C.pcclMin),
		"pcclBand": int(C.pcclBand), "pcclBor": int(C.pcclBor), "pcclBxor": int(C.pcclBxor),
		"pcclPremulSum": int(C.pcclPremulSum), "PCCL_RED_OP_COUNT": int(C.PCCL_RED_OP_COUNT),
		"GLOBAL_WORLD_SIZE":             int(C.PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE),
		"PEER_GROUP_WORLD_SIZE":         int(C.PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE),
		"NUM_DISTINCT_PEER_GROUPS":      int(C.PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS),
		"LARGEST_PEER_GROUP_WORLD_SIZE": int(C.PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE),
		"CURRENT_WORLD_SIZE":            int(C.PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE),
		"COPIED_BYTES":                  int(C.PCCL_ATTRIBUTE_COPIED_BYTES),
		"COPIED_BYTES_HIGH":             int(C.PCCL_ATTRIBUTE_COPIED_BYTES_HIGH),
		"RANK":                          int(C.PCCL_ATTRIBUTE_RANK),
		"EPOCH":                         int(C.PCCL_ATTRIBUTE_EPOCH),
		"ENFORCE_POPULAR":               int(C.PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR),
		"RECEIVE_ONLY":                  int(C.PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY),
		"SEND_ONLY":                     int(C.PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY),
		"pcclQuantNone":                 int(C.pcclQuantNone), "pcclQuantMinMax": int(C.pcclQuantMinMax),
		"pcclQuantZeroPointScale": int(C.pcclQuantZeroPointScale),
		"pcclDistributionNone":    int(C.pcclDistributionNone),
		"pcclDistributionNormal":  int(C.pcclDistributionNormal),
		"pcclDistributionUniform": int(C.pcclDistributionUniform),
		"pcclAlgoAuto":            int(C.pcclAlgoAuto), "pcclAlgoRelay": int(C.pcclAlgoRelay),
		"pcclAlgoDirect": int(C.pcclAlgoDirect), "pcclAlgoRing": int(C.pcclAlgoRing),
		"pcclAlgoRingStriped":     int(C.pcclAlgoRingStriped),
		"pcclAlgoHalvingDoubling": int(C.pcclAlgoHalvingDoubling),
	}
}
