//! cborgate's stand-in for `libz-ng-sys`: the names flate2's C backend takes from
//! it, each a thin call into `libz-rs-sys` (zlib's C API in Rust), so pingora-core's
//! `flate2 = { features = ["zlib-ng"] }` builds without CMake. See README.md.
//!
//! The names are those of `flate2-1.1.11/src/ffi/c.rs` (`mod c_backend`, lines
//! 428-490: `use libz_ng_sys as libz; pub use libz::*;` and the calls in the same
//! file) and `flate2-1.1.11/src/mem.rs` (`ffi::deflateSetDictionary` line 279,
//! `ffi::deflateParams` line 333, `ffi::inflateSetDictionary` line 549). A name
//! missing here is a compile error in flate2, not a behaviour change.

#![allow(non_camel_case_types, non_snake_case, clippy::missing_safety_doc)]

use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use core::mem::{align_of, offset_of, size_of};

use libz_rs_sys as rs;

pub use rs::{
    Z_BEST_COMPRESSION, Z_BEST_SPEED, Z_BLOCK, Z_BUF_ERROR, Z_DATA_ERROR, Z_DEFAULT_COMPRESSION,
    Z_DEFAULT_STRATEGY, Z_DEFLATED, Z_ERRNO, Z_FINISH, Z_FULL_FLUSH, Z_MEM_ERROR, Z_NEED_DICT,
    Z_NO_COMPRESSION, Z_NO_FLUSH, Z_OK, Z_PARTIAL_FLUSH, Z_STREAM_END, Z_STREAM_ERROR,
    Z_SYNC_FLUSH, Z_TREES, Z_VERSION_ERROR,
};

pub type alloc_func = unsafe extern "C" fn(voidpf, uInt, uInt) -> voidpf;
pub type free_func = unsafe extern "C" fn(voidpf, voidpf);
pub type Bytef = u8;
pub type uInt = c_uint;
pub type uLong = c_ulong;
pub type voidpf = *mut c_void;
pub enum internal_state {}

/// libz-rs-sys's `z_stream` (`zlib-rs-0.6.8/src/c_api.rs` line 56) with the two
/// allocator fields as plain function pointers, as in libz-ng-sys: flate2 sets
/// them to its own allocator (`flate2-1.1.11/src/ffi/c.rs` lines 41-57).
/// `Option<fn>` and `fn` share one layout; the whole layout is checked below.
#[repr(C)]
pub struct z_stream {
    pub next_in: *mut Bytef,
    pub avail_in: uInt,
    pub total_in: uLong,
    pub next_out: *mut Bytef,
    pub avail_out: uInt,
    pub total_out: uLong,
    pub msg: *mut c_char,
    pub state: *mut internal_state,
    pub zalloc: alloc_func,
    pub zfree: free_func,
    pub opaque: voidpf,
    pub data_type: c_int,
    pub adler: uLong,
    pub reserved: uLong,
}
pub type z_streamp = *mut z_stream;

/// The two structs are one layout, so a `*mut z_stream` may be handed to libz-rs-sys.
const _: () = {
    macro_rules! same {
        ($($f:ident),*) => {$(
            assert!(offset_of!(z_stream, $f) == offset_of!(rs::z_stream, $f));
        )*};
    }
    same!(
        next_in, avail_in, total_in, next_out, avail_out, total_out, msg, state, zalloc, zfree,
        opaque, data_type, adler, reserved
    );
    assert!(size_of::<z_stream>() == size_of::<rs::z_stream>());
    assert!(align_of::<z_stream>() == align_of::<rs::z_stream>());
};

fn rs(strm: z_streamp) -> *mut rs::z_stream {
    strm.cast()
}

pub fn zlibVersion() -> *const c_char {
    rs::zlibVersion()
}

pub unsafe extern "C" fn deflateInit2_(
    strm: z_streamp,
    level: c_int,
    method: c_int,
    windowBits: c_int,
    memLevel: c_int,
    strategy: c_int,
    version: *const c_char,
    stream_size: c_int,
) -> c_int {
    rs::deflateInit2_(
        rs(strm),
        level,
        method,
        windowBits,
        memLevel,
        strategy,
        version,
        stream_size,
    )
}

pub unsafe extern "C" fn deflate(strm: z_streamp, flush: c_int) -> c_int {
    rs::deflate(rs(strm), flush)
}

pub unsafe extern "C" fn deflateReset(strm: z_streamp) -> c_int {
    rs::deflateReset(rs(strm))
}

pub unsafe extern "C" fn deflateEnd(strm: z_streamp) -> c_int {
    rs::deflateEnd(rs(strm))
}

pub unsafe extern "C" fn deflateParams(strm: z_streamp, level: c_int, strategy: c_int) -> c_int {
    rs::deflateParams(rs(strm), level, strategy)
}

pub unsafe extern "C" fn deflateSetDictionary(
    strm: z_streamp,
    dictionary: *const Bytef,
    dictLength: uInt,
) -> c_int {
    rs::deflateSetDictionary(rs(strm), dictionary, dictLength)
}

pub unsafe extern "C" fn inflateInit2_(
    strm: z_streamp,
    windowBits: c_int,
    version: *const c_char,
    stream_size: c_int,
) -> c_int {
    rs::inflateInit2_(rs(strm), windowBits, version, stream_size)
}

pub unsafe extern "C" fn inflate(strm: z_streamp, flush: c_int) -> c_int {
    rs::inflate(rs(strm), flush)
}

pub unsafe extern "C" fn inflateReset2(strm: z_streamp, windowBits: c_int) -> c_int {
    rs::inflateReset2(rs(strm), windowBits)
}

pub unsafe extern "C" fn inflateEnd(strm: z_streamp) -> c_int {
    rs::inflateEnd(rs(strm))
}

pub unsafe extern "C" fn inflateSetDictionary(
    strm: z_streamp,
    dictionary: *const Bytef,
    dictLength: uInt,
) -> c_int {
    rs::inflateSetDictionary(rs(strm), dictionary, dictLength)
}
