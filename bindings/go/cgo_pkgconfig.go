//go:build !pccl_no_pkgconfig

package pccl

// An installed libpccl (the Debian package, cmake --install) describes its
// header and library directories in pccl.pc: nothing to set beyond
// PKG_CONFIG_PATH for a prefix pkg-config does not search by default.

/*
#cgo pkg-config: pccl
*/
import "C"
