//! Checks pccl-sys against include/pccl.h.
//!
//! 1. A C program compiled against pccl.h with the system C compiler (`$CC`, else `cc`) prints
//!    the size and alignment of every struct, the offset of every field, the value, size and
//!    signedness of every enum and enumerator, every numeric `#define`, the fields of
//!    `PCCL_COMM_CREATE_OPTIONS_INIT`, `PCCL_COLLECTIVE_OPTIONS_INIT` (premul_scalar by its
//!    bits) and `PCCL_TUNE_OPTIONS_INIT`, and the PCCL_RESULT_MAP table; each line must equal what
//!    Rust computes from pccl-sys. `pcclCommCreateParams_t` must moreover have PCCL 1.0's
//!    layout, whatever the header says: 36 bytes, offsets 0, 28 and 32.
//! 2. pccl.h is parsed: every struct's field list, every enumerator, every numeric `#define` and
//!    every `PCCL_EXPORT` function (with its parameter count) must be declared in pccl-sys.
//! 3. Every function is referenced (so the test links against libpccl), and every `pccl*`
//!    symbol libpccl.so exports (`nm -D`) is declared.
//!
//! The header directory is `PCCL_INCLUDE_DIR`, else the repository's include/.
use std::collections::{BTreeMap, BTreeSet};
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;

use pccl_sys::*;

/// Offset of a field without `std::mem::offset_of!` (Rust 1.77): raw pointers into an
/// uninitialized value, never dereferenced.
macro_rules! offset {
    ($ty:ty, $field:ident) => {{
        let u = MaybeUninit::<$ty>::uninit();
        let base = u.as_ptr();
        // SAFETY: addr_of! computes the address without reading or creating a reference.
        let f = unsafe { std::ptr::addr_of!((*base).$field) };
        (f as usize) - (base as usize)
    }};
}

struct StructLayout {
    c_name: &'static str,
    size: usize,
    align: usize,
    fields: Vec<(&'static str, usize)>,
}

macro_rules! structs {
    ($($cname:literal => $ty:ty { $($field:ident),* $(,)? })*) => {
        vec![$(StructLayout {
            c_name: $cname,
            size: size_of::<$ty>(),
            align: align_of::<$ty>(),
            fields: vec![$((stringify!($field), offset!($ty, $field))),*],
        }),*]
    };
}

fn struct_table() -> Vec<StructLayout> {
    structs! {
        "ccoip_ipv4_address_t" => ccoip_ipv4_address_t { data }
        "ccoip_ipv6_address_t" => ccoip_ipv6_address_t { data }
        "ccoip_inet_address_t" => ccoip_inet_address_t { protocol, ipv4, ipv6 }
        "ccoip_socket_address_t" => ccoip_socket_address_t { inet, port }
        "pcclCommCreateParams_t" => pcclCommCreateParams_t {
            master_address, peer_group, p2p_connection_pool_size
        }
        "pcclCommCreateOptions_t" => pcclCommCreateOptions_t {
            struct_size, timeout_ms, heartbeat_ms, reserved, master_url, ring_key, reserved2
        }
        "pcclReduceInfo_t" => pcclReduceInfo_t { local_world_size, tx_bytes, rx_bytes }
        "pcclReduceOperandDescriptor_t" => pcclReduceOperandDescriptor_t {
            datatype, distribution_hint
        }
        "pcclQuantizationOptions_t" => pcclQuantizationOptions_t { quantized_datatype, algorithm }
        "pcclReduceDescriptor_t" => pcclReduceDescriptor_t {
            count, op, tag, src_descriptor, quantization_options
        }
        "pcclReduceOpDescriptor_t" => pcclReduceOpDescriptor_t { sendbuf, recvbuf, descriptor }
        "pcclAsyncReduceOp_t" => pcclAsyncReduceOp_t { comm, tag }
        "pcclRankUuid_t" => pcclRankUuid_t { data }
        "pcclTensorInfo_t" => pcclTensorInfo_t {
            name, data, count, datatype, device_type, allow_content_inequality
        }
        "pcclSharedState_t" => pcclSharedState_t { revision, count, infos }
        "pcclSharedStateSyncInfo_t" => pcclSharedStateSyncInfo_t { tx_bytes, rx_bytes }
        "pcclBuildInfo_t" => pcclBuildInfo_t { has_cuda_support }
        "pcclMasterCreateParams_t" => pcclMasterCreateParams_t {
            listen_url, heartbeat_ms, evict_ms, vote_timeout_ms, max_peers
        }
        "pcclCollectiveOptions_t" => pcclCollectiveOptions_t {
            struct_size, timeout_ms, tag, flags, reserved, premul_scalar, quantization_options,
            algorithm, reserved2
        }
        "pcclCollectiveInfo_t" => pcclCollectiveInfo_t {
            world_size, rank, epoch, tx_bytes, rx_bytes
        }
        "pcclTuneOptions_t" => pcclTuneOptions_t {
            struct_size, iterations, warmup, kinds, min_bytes, max_bytes
        }
    }
}

/// Enum types: C name, Rust size, whether the Rust type is signed.
fn enum_types() -> Vec<(&'static str, usize, bool)> {
    macro_rules! e {
        ($($name:ident),*) => {
            vec![$((stringify!($name), size_of::<$name>(), (0 as $name).checked_sub(1).is_some())),*]
        };
    }
    e!(
        ccoip_inet_protocol_t,
        pcclResult_t,
        pcclDataType_t,
        pcclDeviceType_t,
        pcclRedOp_t,
        pcclAttribute_t,
        pcclSharedStateSyncStrategy_t,
        pcclDistributionHint_t,
        pcclQuantizationAlgorithm_t,
        pcclAlgorithm_t
    )
}

/// Every enumerator and numeric #define, with its Rust value.
fn constants() -> Vec<(&'static str, i64)> {
    macro_rules! c {
        ($($name:ident),* $(,)?) => { vec![$((stringify!($name), $name as i64)),*] };
    }
    c!(
        inetIPv4,
        inetIPv6,
        CCOIP_PROTOCOL_PORT_MASTER,
        CCOIP_PROTOCOL_PORT_SHARED_STATE,
        CCOIP_PROTOCOL_PORT_P2P,
        CCOIP_PROTOCOL_PORT_BANDWIDTH_BENCHMARK,
        PCCL_VERSION_MAJOR,
        PCCL_VERSION_MINOR,
        PCCL_VERSION_PATCH,
        PCCL_VERSION_HEX,
        pcclSuccess,
        pcclNotInitialized,
        pcclInternalError,
        pcclInvalidArgument,
        pcclInvalidUsage,
        pcclTooFewPeers,
        pcclMasterConnectionFailed,
        pcclRankConnectionFailed,
        pcclRankConnectionLost,
        pcclNoSharedStateAvailable,
        pcclPendingAsyncOps,
        pcclUpdateTopologyFailed,
        pcclTopologyOptimizationFailed,
        pcclTimeout,
        pcclSystemError,
        pcclRemoteError,
        pcclSharedStateSyncFailed,
        pcclProtocolError,
        pcclAuthenticationFailed,
        pcclOptimizeTopologyFailed,
        PCCL_RESULT_COUNT,
        pcclUint8,
        pcclInt8,
        pcclInt16,
        pcclUint16,
        pcclUint32,
        pcclInt32,
        pcclUint64,
        pcclInt64,
        pcclFloat16,
        pcclBFloat16,
        pcclFloat,
        pcclDouble,
        PCCL_DATA_TYPE_COUNT,
        pcclDeviceCpu,
        pcclDeviceCuda,
        pcclSum,
        pcclAvg,
        pcclProd,
        pcclMax,
        pcclMin,
        pcclBand,
        pcclBor,
        pcclBxor,
        pcclPremulSum,
        PCCL_RED_OP_COUNT,
        PCCL_ATTRIBUTE_GLOBAL_WORLD_SIZE,
        PCCL_ATTRIBUTE_PEER_GROUP_WORLD_SIZE,
        PCCL_ATTRIBUTE_NUM_DISTINCT_PEER_GROUPS,
        PCCL_ATTRIBUTE_LARGEST_PEER_GROUP_WORLD_SIZE,
        PCCL_ATTRIBUTE_CURRENT_WORLD_SIZE,
        PCCL_ATTRIBUTE_COPIED_BYTES,
        PCCL_ATTRIBUTE_COPIED_BYTES_HIGH,
        PCCL_ATTRIBUTE_RANK,
        PCCL_ATTRIBUTE_EPOCH,
        PCCL_SHARED_STATE_SYNC_STRATEGY_ENFORCE_POPULAR,
        PCCL_SHARED_STATE_SYNC_STRATEGY_RECEIVE_ONLY,
        PCCL_SHARED_STATE_SYNC_STRATEGY_SEND_ONLY,
        pcclDistributionNone,
        pcclDistributionNormal,
        pcclDistributionUniform,
        PCCL_DISTRIBUTION_HINT_NONE,
        PCCL_DISTRIBUTION_HINT_NORMAL,
        PCCL_DISTRIBUTION_HINT_UNIFORM,
        PCCL_NORMAL_DISTRIBUTION_HINT,
        PCCL_UNIFORM_DISTRIBUTION_HINT,
        pcclQuantNone,
        pcclQuantMinMax,
        pcclQuantZeroPointScale,
        pcclAlgoAuto,
        pcclAlgoRelay,
        pcclAlgoDirect,
        pcclAlgoRing,
        pcclAlgoRingStriped,
        pcclAlgoHalvingDoubling,
        PCCL_TUNE_ALL_REDUCE,
        PCCL_TUNE_BROADCAST,
        PCCL_TUNE_REDUCE,
        PCCL_TUNE_ALL_GATHER,
        PCCL_TUNE_REDUCE_SCATTER,
        PCCL_TUNE_ALL_TO_ALL,
        PCCL_TUNE_GATHER,
        PCCL_TUNE_SCATTER,
        PCCL_TUNE_BARRIER,
        PCCL_TUNE_ALL_KINDS,
        PCCL_COLLECTIVE_ABORT_ON_ERROR,
    )
}

fn include_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("PCCL_INCLUDE_DIR") {
        return PathBuf::from(d);
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(4)
        .expect("repository root")
        .join("include")
}

fn read_header(name: &str) -> String {
    let p = include_dir().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {}", p.display(), e))
}

/// The public headers, without comments.
fn headers_source() -> String {
    let mut all = String::new();
    for h in ["ccoip_inet.h", "ccoip.h", "pccl_types.h", "pccl.h"] {
        all.push_str(&strip_comments(&read_header(h)));
        all.push('\n');
    }
    all
}

fn strip_comments(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'*' {
            let end = s[i + 2..]
                .find("*/")
                .map(|e| i + 2 + e + 2)
                .unwrap_or(b.len());
            out.push(' ');
            i = end;
        } else if b[i] == b'/' && i + 1 < b.len() && b[i + 1] == b'/' {
            let end = s[i..].find('\n').map(|e| i + e).unwrap_or(b.len());
            i = end;
        } else {
            let ch = s[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The last identifier of a declaration such as `const char *name` or `uint8_t data[16]`.
fn last_ident(decl: &str) -> String {
    let d = match decl.find('[') {
        Some(k) => &decl[..k],
        None => decl,
    };
    let d = d.trim_end();
    let start = d
        .rfind(|c: char| !is_ident_char(c))
        .map(|k| k + 1)
        .unwrap_or(0);
    d[start..].to_string()
}

/// `typedef struct|enum [tag] { body } NAME;` blocks of the headers: (kind, NAME, body).
fn typedef_blocks(src: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(k) = rest.find("typedef ") {
        let after = &rest[k + 8..];
        let kind = if after.starts_with("struct") {
            "struct"
        } else if after.starts_with("enum") {
            "enum"
        } else {
            rest = after;
            continue;
        };
        let semi = after.find(';').unwrap();
        let brace = after.find('{');
        match brace {
            Some(b) if b < semi => {
                let close = after[b..].find('}').unwrap() + b;
                let tail = &after[close + 1..];
                let end = tail.find(';').unwrap();
                let name = tail[..end].trim().to_string();
                out.push((kind.to_string(), name, after[b + 1..close].to_string()));
                rest = &tail[end..];
            }
            _ => rest = &after[semi..], // an opaque typedef
        }
    }
    out
}

/// Object-like `#define`s with a value, except the export/annotation macros and include guards:
/// (numeric ones, struct initializers `{...}`).
fn numeric_defines(src: &str) -> (Vec<String>, Vec<String>) {
    let mut out = Vec::new();
    let mut initializers = Vec::new();
    let joined = src.replace("\\\n", " "); // continuation lines
    for line in joined.lines() {
        let l = line.trim_start();
        if let Some(r) = l.strip_prefix("#define ") {
            let r = r.trim_start();
            let end = r.find(|c: char| !is_ident_char(c)).unwrap_or(r.len());
            let name = &r[..end];
            let rest = &r[end..];
            if rest.starts_with('(') || rest.trim().is_empty() {
                continue; // function-like, or a flag (include guards, PCCL_NULLABLE)
            }
            if rest.trim_start().starts_with('{') {
                initializers.push(name.to_string());
                continue;
            }
            if name == "PCCL_EXPORT" {
                continue;
            }
            out.push(name.to_string());
        }
    }
    (out, initializers)
}

/// Every `PCCL_EXPORT` function of pccl.h with its parameter count.
fn exported_functions(src: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    let mut rest = src;
    // Declarations start a line with PCCL_EXPORT (the macro's own #defines do not).
    while let Some(k) = rest.find("\nPCCL_EXPORT ") {
        let decl_full = &rest[k + 13..];
        let end = decl_full.find(';').unwrap();
        let decl: String = decl_full[..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        rest = &decl_full[end..];
        // The name: the first identifier starting with "pccl" that is not a type name.
        let mut name = None;
        let mut i = 0;
        let chars: Vec<char> = decl.chars().collect();
        while i < chars.len() {
            if is_ident_char(chars[i]) {
                let s = i;
                while i < chars.len() && is_ident_char(chars[i]) {
                    i += 1;
                }
                let id: String = chars[s..i].iter().collect();
                if id.starts_with("pccl") && !id.ends_with("_t") {
                    name = Some((id, i));
                    break;
                }
            } else {
                i += 1;
            }
        }
        let (name, pos) = name.expect("function name");
        // The parameter list: the next '(' after the name (skipping a ')' around the name).
        let open = decl[pos..].find('(').unwrap() + pos;
        let close = decl.rfind(')').unwrap();
        let params = decl[open + 1..close].trim();
        let n = if params == "void" || params.is_empty() {
            0
        } else {
            params.split(',').count()
        };
        out.insert(name, n);
    }
    out
}

/// `pub fn NAME(...)` declarations of pccl-sys's source, with their parameter counts.
fn declared_functions() -> BTreeMap<String, usize> {
    let src = include_str!("../src/lib.rs");
    let mut out = BTreeMap::new();
    let mut rest = src;
    while let Some(k) = rest.find("pub fn ") {
        let after = &rest[k + 7..];
        let open = after.find('(').unwrap();
        let name = after[..open].trim().to_string();
        let close = after.find(')').unwrap();
        let params = &after[open + 1..close];
        let n = params.split(',').filter(|p| !p.trim().is_empty()).count();
        out.insert(name, n);
        rest = &after[close..];
    }
    out
}

fn c_program() -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include \"pccl.h\"\n\
         #define PRINT_RESULT(name, value, message) \
         printf(\"resultmap %d %s %s\\n\", (int)(value), #name, message);\n\
         int main(void) {\n",
    );
    for s in struct_table() {
        c.push_str(&format!(
            "printf(\"size {0} %zu\\n\", sizeof({0}));\n\
             printf(\"align {0} %zu\\n\", _Alignof({0}));\n",
            s.c_name
        ));
        for (f, _) in &s.fields {
            c.push_str(&format!(
                "printf(\"offset {0}.{1} %zu\\n\", offsetof({0}, {1}));\n",
                s.c_name, f
            ));
        }
    }
    for (e, _, _) in enum_types() {
        c.push_str(&format!(
            "printf(\"size {0} %zu\\n\", sizeof({0}));\n\
             printf(\"signed {0} %d\\n\", (int)(({0})-1 < 0));\n",
            e
        ));
    }
    for (name, _) in constants() {
        c.push_str(&format!(
            "printf(\"const {0} %lld\\n\", (long long)({0}));\n",
            name
        ));
    }
    c.push_str(
        "{ const pcclCommCreateOptions_t o = PCCL_COMM_CREATE_OPTIONS_INIT;\n\
         printf(\"init PCCL_COMM_CREATE_OPTIONS_INIT %u %u %u %u %d\\n\", (unsigned)o.struct_size, \
         (unsigned)o.timeout_ms, (unsigned)o.heartbeat_ms, (unsigned)o.reserved, \
         o.master_url == NULL); }\n",
    );
    c.push_str(
        "{ const pcclCollectiveOptions_t o = PCCL_COLLECTIVE_OPTIONS_INIT;\n\
         union { double d; unsigned long long u; } b; b.d = o.premul_scalar;\n\
         printf(\"init PCCL_COLLECTIVE_OPTIONS_INIT %u %u %llu %u %u %llx %d %d %u %u\\n\", \
         (unsigned)o.struct_size, (unsigned)o.timeout_ms, (unsigned long long)o.tag, \
         (unsigned)o.flags, (unsigned)o.reserved, b.u, \
         (int)o.quantization_options.quantized_datatype, \
         (int)o.quantization_options.algorithm, (unsigned)o.algorithm, \
         (unsigned)o.reserved2); }\n",
    );
    c.push_str(
        "{ const pcclTuneOptions_t o = PCCL_TUNE_OPTIONS_INIT;\n\
         printf(\"init PCCL_TUNE_OPTIONS_INIT %u %u %u %u %llu %llu\\n\", \
         (unsigned)o.struct_size, (unsigned)o.iterations, (unsigned)o.warmup, \
         (unsigned)o.kinds, (unsigned long long)o.min_bytes, \
         (unsigned long long)o.max_bytes); }\n",
    );
    c.push_str("PCCL_RESULT_MAP(PRINT_RESULT)\nreturn 0;\n}\n");
    c
}

fn rust_lines() -> Vec<String> {
    let mut v = Vec::new();
    for s in struct_table() {
        v.push(format!("size {} {}", s.c_name, s.size));
        v.push(format!("align {} {}", s.c_name, s.align));
        for (f, off) in &s.fields {
            v.push(format!("offset {}.{} {}", s.c_name, f, off));
        }
    }
    for (e, size, signed) in enum_types() {
        v.push(format!("size {} {}", e, size));
        v.push(format!("signed {} {}", e, signed as i32));
    }
    for (name, value) in constants() {
        v.push(format!("const {} {}", name, value));
    }
    let o = PCCL_COMM_CREATE_OPTIONS_INIT;
    v.push(format!(
        "init PCCL_COMM_CREATE_OPTIONS_INIT {} {} {} {} {}",
        o.struct_size,
        o.timeout_ms,
        o.heartbeat_ms,
        o.reserved,
        o.master_url.is_null() as i32
    ));
    let o = PCCL_COLLECTIVE_OPTIONS_INIT;
    v.push(format!(
        "init PCCL_COLLECTIVE_OPTIONS_INIT {} {} {} {} {} {:x} {} {} {} {}",
        o.struct_size,
        o.timeout_ms,
        o.tag,
        o.flags,
        o.reserved,
        o.premul_scalar.to_bits(),
        o.quantization_options.quantized_datatype,
        o.quantization_options.algorithm,
        o.algorithm,
        o.reserved2
    ));
    let o = PCCL_TUNE_OPTIONS_INIT;
    v.push(format!(
        "init PCCL_TUNE_OPTIONS_INIT {} {} {} {} {} {}",
        o.struct_size, o.iterations, o.warmup, o.kinds, o.min_bytes, o.max_bytes
    ));
    for (value, name, message) in PCCL_RESULT_MAP.iter() {
        v.push(format!("resultmap {} {} {}", value, name, message));
    }
    v
}

#[test]
fn layout_and_constants_match_the_c_compiler() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pccl_sys_abi");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("abi.c");
    let exe = dir.join("abi");
    std::fs::write(&src, c_program()).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let st = Command::new(&cc)
        .arg("-std=c11")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-I")
        .arg(include_dir())
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("run {}: {}", cc, e));
    assert!(st.success(), "compiling {} failed", src.display());
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let c_lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|s| s.to_string())
        .collect();
    let r_lines = rust_lines();
    let mut mismatches = Vec::new();
    for (c, r) in c_lines.iter().zip(r_lines.iter()) {
        if c != r {
            mismatches.push(format!("C: {:<60} Rust: {}", c, r));
        }
    }
    assert_eq!(c_lines.len(), r_lines.len(), "line counts differ");
    assert!(
        mismatches.is_empty(),
        "ABI mismatches:\n{}",
        mismatches.join("\n")
    );
    // The checks cover something: 21 structs, 10 enums, every result code.
    assert!(c_lines.len() > 150, "only {} lines", c_lines.len());
}

#[test]
fn comm_create_params_have_pccl_1_0_layout() {
    // PCCL 1.0's struct: a 28-byte ccoip_socket_address_t, then two uint32_t. Binaries built
    // against PCCL 1.0's header pass exactly this.
    assert_eq!(size_of::<ccoip_socket_address_t>(), 28);
    assert_eq!(size_of::<pcclCommCreateParams_t>(), 36);
    assert_eq!(align_of::<pcclCommCreateParams_t>(), 4);
    assert_eq!(offset!(pcclCommCreateParams_t, master_address), 0);
    assert_eq!(offset!(pcclCommCreateParams_t, peer_group), 28);
    assert_eq!(
        offset!(pcclCommCreateParams_t, p2p_connection_pool_size),
        32
    );
    // pccl's options: four uint32_t, the URL pointer at 16, then ring_key and reserved2.
    assert_eq!(offset!(pcclCommCreateOptions_t, struct_size), 0);
    assert_eq!(offset!(pcclCommCreateOptions_t, timeout_ms), 4);
    assert_eq!(offset!(pcclCommCreateOptions_t, heartbeat_ms), 8);
    assert_eq!(offset!(pcclCommCreateOptions_t, reserved), 12);
    assert_eq!(offset!(pcclCommCreateOptions_t, master_url), 16);
    let key_at = 16 + size_of::<*const u8>();
    assert_eq!(offset!(pcclCommCreateOptions_t, ring_key), key_at);
    assert_eq!(offset!(pcclCommCreateOptions_t, reserved2), key_at + 4);
    let a = align_of::<pcclCommCreateOptions_t>();
    assert_eq!(
        size_of::<pcclCommCreateOptions_t>(),
        (key_at + 8 + a - 1) / a * a
    );
    let d = pcclCommCreateOptions_t::default();
    assert_eq!(d, PCCL_COMM_CREATE_OPTIONS_INIT);
    assert_eq!(d.struct_size as usize, size_of::<pcclCommCreateOptions_t>());
    assert_eq!(
        pcclCommCreateParams_t::default().p2p_connection_pool_size,
        0
    );
    // The collective options: two uint32_t, the tag at 8, flags and reserved, the factor at 24,
    // the quantization at 32 (where the first version of the struct ended: struct_size 32 is
    // still accepted), the algorithm at 40 (where the second ended: 40 is accepted too) and
    // reserved2 at 44.
    assert_eq!(size_of::<pcclCollectiveOptions_t>(), 48);
    assert_eq!(align_of::<pcclCollectiveOptions_t>(), 8);
    assert_eq!(offset!(pcclCollectiveOptions_t, tag), 8);
    assert_eq!(offset!(pcclCollectiveOptions_t, premul_scalar), 24);
    assert_eq!(offset!(pcclCollectiveOptions_t, quantization_options), 32);
    assert_eq!(offset!(pcclCollectiveOptions_t, algorithm), 40);
    assert_eq!(offset!(pcclCollectiveOptions_t, reserved2), 44);
    let o = pcclCollectiveOptions_t::default();
    assert_eq!(o, PCCL_COLLECTIVE_OPTIONS_INIT);
    assert_eq!(o.struct_size as usize, size_of::<pcclCollectiveOptions_t>());
    assert_eq!(o.premul_scalar, 1.0);
    assert_eq!((o.algorithm, o.reserved2), (pcclAlgoAuto, 0));
    // The tuner's options: four uint32_t, then the two byte bounds at 16 and 24.
    assert_eq!(size_of::<pcclTuneOptions_t>(), 32);
    assert_eq!(align_of::<pcclTuneOptions_t>(), 8);
    assert_eq!(offset!(pcclTuneOptions_t, iterations), 4);
    assert_eq!(offset!(pcclTuneOptions_t, warmup), 8);
    assert_eq!(offset!(pcclTuneOptions_t, kinds), 12);
    assert_eq!(offset!(pcclTuneOptions_t, min_bytes), 16);
    assert_eq!(offset!(pcclTuneOptions_t, max_bytes), 24);
    let t = pcclTuneOptions_t::default();
    assert_eq!(t, PCCL_TUNE_OPTIONS_INIT);
    assert_eq!(t.struct_size, 32);
}

#[test]
fn every_struct_field_enumerator_and_define_of_the_header_is_declared() {
    let src = headers_source();
    let table = struct_table();
    let consts: BTreeSet<&str> = constants().iter().map(|c| c.0).collect();
    let enums: BTreeSet<&str> = enum_types().iter().map(|e| e.0).collect();
    let mut structs_seen = 0;
    let mut enumerators_seen = 0;
    for (kind, name, body) in typedef_blocks(&src) {
        if kind == "struct" {
            structs_seen += 1;
            let s = table
                .iter()
                .find(|s| s.c_name == name)
                .unwrap_or_else(|| panic!("struct {} of the header is not checked", name));
            let fields: Vec<String> = body
                .split(';')
                .map(|d| d.trim())
                .filter(|d| !d.is_empty())
                .map(last_ident)
                .collect();
            let rust: Vec<String> = s.fields.iter().map(|f| f.0.to_string()).collect();
            assert_eq!(fields, rust, "fields of {}", name);
        } else {
            assert!(
                enums.contains(name.as_str()),
                "enum {} is not declared",
                name
            );
            for item in body.split(',') {
                let id = item.split('=').next().unwrap().trim();
                if id.is_empty() {
                    continue;
                }
                enumerators_seen += 1;
                assert!(
                    consts.contains(id),
                    "enumerator {} ({}) is not declared",
                    id,
                    name
                );
            }
        }
    }
    assert_eq!(
        structs_seen,
        table.len(),
        "every checked struct is in the header"
    );
    assert_eq!(enumerators_seen, 74, "enumerators in the headers");
    let (defines, initializers) = numeric_defines(&src);
    // The C program prints the initializers' fields (the "init" lines of the layout test).
    assert_eq!(
        initializers,
        [
            "PCCL_COMM_CREATE_OPTIONS_INIT",
            "PCCL_COLLECTIVE_OPTIONS_INIT",
            "PCCL_TUNE_OPTIONS_INIT"
        ]
    );
    assert!(defines.len() >= 11, "{:?}", defines);
    for d in defines {
        assert!(consts.contains(d.as_str()), "#define {} is not declared", d);
    }
}

#[test]
fn every_exported_function_is_declared_with_its_arity() {
    let header = exported_functions(&strip_comments(&read_header("pccl.h")));
    let declared = declared_functions();
    assert_eq!(header.len(), 67, "{:?}", header.keys().collect::<Vec<_>>());
    assert_eq!(header, declared);
}

#[test]
fn every_function_links_and_every_exported_symbol_is_declared() {
    // Referencing each function makes the linker resolve it in libpccl.
    let fns: [usize; 67] = [
        pcclInit as *const () as usize,
        pcclGetVersion as *const () as usize,
        pcclGetBuildInfo as *const () as usize,
        pcclCreateCommunicator as *const () as usize,
        pcclCreateCommunicatorEx as *const () as usize,
        pcclDestroyCommunicator as *const () as usize,
        pcclConnect as *const () as usize,
        pcclUpdateTopology as *const () as usize,
        pcclArePeersPending as *const () as usize,
        pcclOptimizeTopology as *const () as usize,
        pcclGetAttribute as *const () as usize,
        pcclAllReduce as *const () as usize,
        pcclAllReduceAsync as *const () as usize,
        pcclAwaitAsyncReduce as *const () as usize,
        pcclAwaitAsyncReduceTimeout as *const () as usize,
        pcclAllReduceMultipleWithRetry as *const () as usize,
        pcclAllReduceEx as *const () as usize,
        pcclAllReduceExAsync as *const () as usize,
        pcclBroadcast as *const () as usize,
        pcclBroadcastAsync as *const () as usize,
        pcclReduce as *const () as usize,
        pcclReduceAsync as *const () as usize,
        pcclAllGather as *const () as usize,
        pcclAllGatherAsync as *const () as usize,
        pcclReduceScatter as *const () as usize,
        pcclReduceScatterAsync as *const () as usize,
        pcclAllToAll as *const () as usize,
        pcclAllToAllAsync as *const () as usize,
        pcclGather as *const () as usize,
        pcclGatherAsync as *const () as usize,
        pcclScatter as *const () as usize,
        pcclScatterAsync as *const () as usize,
        pcclBarrier as *const () as usize,
        pcclBarrierAsync as *const () as usize,
        pcclAllGatherList as *const () as usize,
        pcclAllGatherListAsync as *const () as usize,
        pcclReduceScatterList as *const () as usize,
        pcclReduceScatterListAsync as *const () as usize,
        pcclAllToAllList as *const () as usize,
        pcclAllToAllListAsync as *const () as usize,
        pcclAllToAllV as *const () as usize,
        pcclAllToAllVAsync as *const () as usize,
        pcclSend as *const () as usize,
        pcclSendAsync as *const () as usize,
        pcclRecv as *const () as usize,
        pcclRecvAsync as *const () as usize,
        pcclCommSplit as *const () as usize,
        pcclGatherList as *const () as usize,
        pcclGatherListAsync as *const () as usize,
        pcclScatterList as *const () as usize,
        pcclScatterListAsync as *const () as usize,
        pcclWorkWait as *const () as usize,
        pcclWorkWaitTimeout as *const () as usize,
        pcclWorkIsCompleted as *const () as usize,
        pcclWorkFree as *const () as usize,
        pcclTune as *const () as usize,
        pcclTuneSave as *const () as usize,
        pcclTuneLoad as *const () as usize,
        pcclGetAlgorithm as *const () as usize,
        pcclSynchronizeSharedState as *const () as usize,
        pcclSynchronizeSharedStateEx as *const () as usize,
        pcclCreateMaster as *const () as usize,
        pcclCreateMasterEx as *const () as usize,
        pcclRunMaster as *const () as usize,
        pcclInterruptMaster as *const () as usize,
        pcclMasterAwaitTermination as *const () as usize,
        pcclDestroyMaster as *const () as usize,
    ];
    assert!(fns.iter().all(|&f| f != 0));
    let mut version = 0u32;
    assert_eq!(unsafe { pcclGetVersion(&mut version) }, pcclSuccess);
    assert_eq!(version >> 16, PCCL_VERSION_MAJOR, "runtime major version");
    assert_eq!(
        unsafe { pcclGetVersion(std::ptr::null_mut()) },
        pcclInvalidArgument
    );

    let lib_dir = match option_env!("PCCL_SYS_LIB_DIR") {
        Some(d) => PathBuf::from(d),
        None => return, // linked from the system path: nothing to list
    };
    let out = match Command::new("nm")
        .arg("-D")
        .arg("--defined-only")
        .arg(lib_dir.join("libpccl.so"))
        .output()
    {
        Ok(o) if o.status.success() => o,
        _ => {
            eprintln!("nm unavailable: exported symbol list not checked");
            return;
        }
    };
    let declared = declared_functions();
    let mut exported = 0;
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let mut parts = line.split_whitespace();
        let (kind, name) = match (parts.next(), parts.next(), parts.next()) {
            (Some(_), Some(k), Some(n)) => (k, n),
            _ => continue,
        };
        if kind == "T" && name.starts_with("pccl") {
            exported += 1;
            assert!(
                declared.contains_key(name),
                "libpccl exports {} which pccl-sys lacks",
                name
            );
        }
    }
    assert_eq!(exported, declared.len(), "exported pccl* functions");
}
