#!/usr/bin/python3
"""protoc-gen-ccoip: generates the plain-C codec of ccoip.proto.

A protoc plugin (it reads a CodeGeneratorRequest on stdin and writes a
CodeGeneratorResponse on stdout):

    protoc --plugin=protoc-gen-ccoip=schema/gen.py --ccoip_out=OUT -Ischema schema/ccoip.proto

For X.proto it writes X_pb.h and X_pb.c: one struct and three functions
(encoded_size, encode, decode) per message, enum constants, and the fixed
runtime of schema/templates/ (varints, bounds checks, arena). The output has
no dependency beyond <stdint.h>, <stdbool.h>, <string.h> and pccl_types.h, does no
I/O and allocates nothing, so it compiles into core/ for every target.
docs/protocol.md §4 states the rules the decoders enforce and §12 the C API.

Use schema/regen.py rather than calling protoc by hand: it writes the
committed copy in schema/gen/ and checks it (--check).
Runs under Debian's /usr/bin/python3, which provides python3-protobuf.
"""
import os
import sys

from google.protobuf import descriptor_pb2
from google.protobuf.compiler import plugin_pb2

FD = descriptor_pb2.FieldDescriptorProto
DECODE_PARAMS = ["const uint8_t *buf", "uint64_t len", "const ccoip_pb_limits *lim",
                 "ccoip_pb_arena *arena"]


def ENC_PARAMS(cname):
    return [f"const {cname} *m", "uint8_t *buf", "uint64_t cap", "uint64_t *len_out"]


DEC_PARAMS = ["pb_dec *d", "const uint8_t *p", "uint64_t n", "uint32_t depth"]
HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = os.path.join(HERE, "templates")
PREFIX = "ccoip_pb_"

C_KEYWORDS = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false",
}

# proto type -> (C type, element wire type macro, element reader, packable)
SCALARS = {
    FD.TYPE_BOOL: ("bool", "PB_WT_VARINT", "bool", True),
    FD.TYPE_UINT32: ("uint32_t", "PB_WT_VARINT", "u32", True),
    FD.TYPE_UINT64: ("uint64_t", "PB_WT_VARINT", "u64", True),
    FD.TYPE_FIXED32: ("uint32_t", "PB_WT_I32", "fixed32", True),
    FD.TYPE_FIXED64: ("uint64_t", "PB_WT_I64", "fixed64", True),
    FD.TYPE_ENUM: ("int32_t", "PB_WT_VARINT", "enum", True),
    FD.TYPE_STRING: ("ccoip_pb_bytes", "PB_WT_LEN", None, False),
    FD.TYPE_BYTES: ("ccoip_pb_bytes", "PB_WT_LEN", None, False),
}
# Fewest input bytes one element of a repeated field can take (packed when packable).
MIN_WIRE = {
    FD.TYPE_BOOL: 1, FD.TYPE_UINT32: 1, FD.TYPE_UINT64: 1, FD.TYPE_FIXED32: 4,
    FD.TYPE_FIXED64: 8, FD.TYPE_ENUM: 1, FD.TYPE_STRING: 2, FD.TYPE_BYTES: 2,
    FD.TYPE_MESSAGE: 2,
}


class GenError(Exception):
    pass


def snake(name):
    """CamelCase -> snake_case: P2pEstablished -> p2p_established."""
    out = []
    for i, c in enumerate(name):
        if c.isupper():
            prev = name[i - 1] if i > 0 else ""
            nxt = name[i + 1] if i + 1 < len(name) else ""
            if i > 0 and (prev.islower() or prev.isdigit() or (prev.isupper() and nxt.islower())):
                out.append("_")
            out.append(c.lower())
        else:
            out.append(c)
    return "".join(out)


def c_ident(name):
    return name + "_" if name in C_KEYWORDS else name


def wrap(text, width, prefix):
    """Greedy word wrap; returns lines (without newline) each starting with prefix."""
    lines, cur = [], ""
    for word in text.split():
        if cur and len(prefix) + len(cur) + 1 + len(word) > width:
            lines.append(prefix + cur)
            cur = word
        else:
            cur = cur + " " + word if cur else word
    if cur:
        lines.append(prefix + cur)
    return lines


def pack(first, indent, params, tail):
    """Bin-packs params after first; continuation lines start with indent."""
    lines, cur = [], first + params[0]
    for i, prm in enumerate(params[1:], 1):
        end = tail if i == len(params) - 1 else ","
        if len(cur) + 2 + len(prm) + len(end) <= 100:
            cur += ", " + prm
        else:
            lines.append(cur + ",")
            cur = indent + prm
    lines.append(cur + tail)
    return lines


def decl(head, params, tail):
    """A function head laid out as clang-format does at 100 columns: parameters
    bin-packed after the '('; else the return type on a line of its own; else the
    parameters on the next lines, indented by 4."""
    ret, name = head.rsplit(" ", 1)
    for lines in (pack(head, " " * len(head), params, tail),
                  [ret] + pack(name, " " * len(name), params, tail),
                  [head] + pack("    ", "    ", params, tail)):
        if all(len(x) <= 100 for x in lines):
            return lines
    raise GenError(f"cannot lay out {head}")


def comment_block(text, indent=""):
    """A /* */ comment of the given text, wrapped to the column limit."""
    text = " ".join(text.replace("*/", "* /").split())
    if not text:
        return []
    one = indent + "/* " + text + " */"
    if len(one) <= 100:
        return [one]
    return [indent + "/*"] + wrap(text, 100, indent + " * ") + [indent + " */"]


class Field:
    def __init__(self, fd, msg, comment):
        self.fd = fd
        self.name = c_ident(fd.name)
        self.number = fd.number
        self.type = fd.type
        self.repeated = fd.label == FD.LABEL_REPEATED
        self.oneof = None
        self.comment = comment
        self.bit = None
        if fd.type not in SCALARS and fd.type != FD.TYPE_MESSAGE:
            raise GenError(f"{msg}.{fd.name}: field type {fd.type} is not supported")
        if fd.proto3_optional:
            raise GenError(f"{msg}.{fd.name}: proto3 'optional' is not supported")
        self.type_name = fd.type_name  # ".ccoip.Endpoint" for messages and enums

    @property
    def is_msg(self):
        return self.type == FD.TYPE_MESSAGE

    @property
    def is_bytes(self):
        return self.type in (FD.TYPE_STRING, FD.TYPE_BYTES)

    @property
    def utf8(self):
        return "true" if self.type == FD.TYPE_STRING else "false"


class Message:
    def __init__(self, dp, package, comments, index):
        self.proto_name = dp.name
        self.full_name = (package + "." if package else "") + dp.name
        self.cname = PREFIX + snake(dp.name)
        self.comment = comments.get((4, index), "")
        if dp.nested_type or dp.enum_type:
            raise GenError(f"{dp.name}: nested messages and enums are not supported")
        if dp.extension_range or dp.extension:
            raise GenError(f"{dp.name}: extensions are not supported")
        self.fields = []
        for fi, fd in enumerate(dp.field):
            self.fields.append(Field(fd, dp.name, comments.get((4, index, 2, fi), "")))
        self.oneofs = []  # (name, [fields])
        for oi, od in enumerate(dp.oneof_decl):
            members = [f for f in self.fields if f.fd.HasField("oneof_index")
                       and f.fd.oneof_index == oi]
            for f in members:
                f.oneof = c_ident(od.name)
                if not f.is_msg:
                    raise GenError(f"{dp.name}.{f.name}: oneof members must be messages")
            self.oneofs.append((c_ident(od.name), members))
        if len(self.oneofs) > 1:
            raise GenError(f"{dp.name}: at most one oneof per message is supported")
        bit = 0
        for f in self.fields:
            if not f.repeated and f.oneof is None:
                f.bit = bit
                bit += 1
        if bit > 63:
            raise GenError(f"{dp.name}: more than 63 singular fields")
        self.fields_by_number = sorted(self.fields, key=lambda f: f.number)

    def case_name(self, oneof, field=None):
        base = f"{self.cname}_{oneof}".upper()
        return base + "_" + (field.name.upper() if field else "NONE")

    def case_type(self, oneof):
        return f"{self.cname}_{oneof}_case"


class Enum:
    def __init__(self, ep, comments, index):
        self.proto_name = ep.name
        self.cname = PREFIX + snake(ep.name)
        self.comment = comments.get((5, index), "")
        self.values = []
        for vi, v in enumerate(ep.value):
            self.values.append((v.name, v.number, comments.get((5, index, 2, vi), "")))


class Gen:
    def __init__(self, fdp):
        self.fdp = fdp
        if fdp.syntax != "proto3":
            raise GenError(f"{fdp.name}: only proto3 is supported")
        comments = {}
        for loc in fdp.source_code_info.location:
            text = (loc.leading_comments + " " + loc.trailing_comments).strip()
            if text:
                comments[tuple(loc.path)] = text
        self.enums = [Enum(e, comments, i) for i, e in enumerate(fdp.enum_type)]
        self.messages = [Message(m, fdp.package, comments, i)
                         for i, m in enumerate(fdp.message_type)]
        self.pkg = "." + fdp.package if fdp.package else ""
        self.msg_by_ref = {self.pkg + "." + m.proto_name: m for m in self.messages}
        self.enum_by_ref = {self.pkg + "." + e.proto_name: e for e in self.enums}
        for m in self.messages:
            for f in m.fields:
                if f.is_msg and f.type_name not in self.msg_by_ref:
                    raise GenError(f"{m.proto_name}.{f.name}: unknown message {f.type_name}")
                if f.type == FD.TYPE_ENUM and f.type_name not in self.enum_by_ref:
                    raise GenError(f"{m.proto_name}.{f.name}: unknown enum {f.type_name}")
        self.ordered = self.topo_order()
        self.base = os.path.splitext(os.path.basename(fdp.name))[0] + "_pb"

    # ---- helpers ----

    def sub(self, f):
        return self.msg_by_ref[f.type_name]

    def enum_of(self, f):
        return self.enum_by_ref[f.type_name]

    def topo_order(self):
        """Messages ordered so that a struct embedded by value is defined first."""
        order, state = [], {}

        def visit(m, stack):
            if state.get(m.full_name) == 2:
                return
            if state.get(m.full_name) == 1:
                raise GenError(f"recursive message {m.proto_name} cannot be embedded by value")
            state[m.full_name] = 1
            for f in m.fields:
                if f.is_msg and not f.repeated:
                    visit(self.msg_by_ref[f.type_name], stack + [m.proto_name])
            state[m.full_name] = 2
            order.append(m)

        for m in self.messages:
            visit(m, [])
        return order

    def depth(self, m):
        """Deepest sub-message nesting below m (m itself is depth 0)."""
        d = 0
        for f in m.fields:
            if f.is_msg:
                d = max(d, 1 + self.depth(self.sub(f)))
        return d

    def ctype(self, f):
        if f.is_msg:
            return self.sub(f).cname
        return SCALARS[f.type][0]

    def value_ref(self, m, f, obj="m"):
        if f.oneof:
            return f"{obj}->{f.oneof}.{f.name}"
        return f"{obj}->{f.name}"

    # ---- header ----

    def banner(self, what):
        return [
            "/*",
            f" * {self.base}.{what} — generated by schema/gen.py from schema/{self.fdp.name}.",
            " * DO NOT EDIT: change the .proto (or the generator) and run schema/regen.py.",
            " * The test schema_codegen_up_to_date fails when this file is stale.",
            " */",
        ]

    def header(self):
        guard = self.base.upper() + "_H"
        L = self.banner("h")
        L += [f"#ifndef {guard}", f"#define {guard}", "", "#include <stdbool.h>",
              "#include <stdint.h>", "", '#include "pccl_types.h"', "", "#ifdef __cplusplus",
              'extern "C" {', "#endif", ""]
        L += read_template("runtime.h.in").rstrip("\n").split("\n")
        L += ["", "/* ---- enumerations ---- */", ""]
        for e in self.enums:
            L += comment_block(f"{e.proto_name} ({self.fdp.name}). {e.comment}")
            L.append(f"typedef enum {e.cname} {{")
            for name, num, com in e.values:
                L += comment_block(com, "    ")
                L.append(f"    CCOIP_PB_{name} = {num},")
            L[-1] = L[-1].rstrip(",")
            L.append(f"}} {e.cname};")
            L.append("")
            L += comment_block(f"True when v is a value of {e.proto_name} this codec knows.")
            L.append(f"bool {e.cname}_is_known(int32_t v);")
            L += comment_block(f"The name of a {e.proto_name} value (\"{e.values[0][0]}\"), "
                               "or NULL for an unknown one.")
            L.append(f"const char *{e.cname}_name(int32_t v);")
            L.append("")
        L += ["/* ---- messages ---- */", ""]
        for m in self.messages:
            L.append(f"typedef struct {m.cname} {m.cname};")
        L.append("")
        for m in self.ordered:
            L += self.struct(m)
        L += ["/* ---- codec functions ---- */", ""]
        L += comment_block(
            "For every message M: ccoip_pb_M_encoded_size stores the encoded size in "
            "*size_out. ccoip_pb_M_encode writes the encoding to buf[0 .. cap) and stores its "
            "length in *len_out (also when cap is too small, so the caller can retry). "
            "ccoip_pb_M_decode decodes buf[0 .. len) into *out; lim NULL means the default "
            "limits; arena may be NULL for messages without repeated fields. Results: "
            "pcclSuccess; pcclInvalidArgument for a NULL argument, an unset or unknown "
            "enum/oneof value, invalid UTF-8 or NULL data in a string to encode, cap too "
            "small, or an arena too small to decode (see ccoip_pb_arena_bound); "
            "pcclProtocolError for input that is malformed or exceeds lim (*out is then "
            "unspecified).")
        L.append("")
        for m in self.messages:
            n = m.cname
            L += decl(f"pcclResult_t {n}_encoded_size(", [f"const {n} *m", "uint64_t *size_out"],
                      ");")
            L += decl(f"pcclResult_t {n}_encode(", ENC_PARAMS(n), ");")
            L += decl(f"pcclResult_t {n}_decode(", DECODE_PARAMS + [f"{n} *out"], ");")
            L.append("")
        L += [
            "/* ---- generic access, for tests, fuzzers and tools ---- */",
            "",
            "/** A message type, with type-erased codec functions (void * is the struct). */",
            "typedef struct ccoip_pb_message_desc {",
            "    const char *name; /**< Full protobuf name, e.g. \"ccoip.Hello\". */",
            "    uint64_t struct_size;",
            "    pcclResult_t (*encoded_size)(const void *m, uint64_t *size_out);",
            "    pcclResult_t (*encode)(const void *m, uint8_t *buf, uint64_t cap, "
            "uint64_t *len_out);",
            "    pcclResult_t (*decode)(const uint8_t *buf, uint64_t len, "
            "const ccoip_pb_limits *lim,",
            "                           ccoip_pb_arena *arena, void *out);",
            "} ccoip_pb_message_desc;",
            "",
            "/** Number of message types. */",
            f"#define CCOIP_PB_MESSAGE_COUNT ({len(self.messages)})",
            "",
            "/** Deepest sub-message nesting the schema allows (the top level is 0). */",
            f"#define CCOIP_PB_SCHEMA_MAX_DEPTH ({max(self.depth(m) for m in self.messages)})",
            "",
            "/** Every message type, in .proto order. */",
            "extern const ccoip_pb_message_desc ccoip_pb_messages[CCOIP_PB_MESSAGE_COUNT];",
            "",
            "/** The message type of a full name (\"ccoip.Hello\"), or NULL. */",
            "const ccoip_pb_message_desc *ccoip_pb_find_message(const char *name);",
            "",
            "#ifdef __cplusplus",
            "}",
            "#endif",
            "",
            f"#endif /* {guard} */",
        ]
        return "\n".join(L) + "\n"

    def struct(self, m):
        L = comment_block(f"{m.proto_name} ({self.fdp.name}). {m.comment}")
        for oneof, members in m.oneofs:
            L.append(f"typedef enum {m.case_type(oneof)} {{")
            L.append(f"    {m.case_name(oneof)} = 0,")
            for f in members:
                L.append(f"    {m.case_name(oneof, f)} = {f.number},")
            L[-1] = L[-1].rstrip(",")
            L.append(f"}} {m.case_type(oneof)};")
            L.append("")
        L.append(f"struct {m.cname} {{")
        if not m.fields:
            L.append("    uint8_t unused; /* C has no empty structs; never encoded */")
        emitted_oneofs = set()
        for f in m.fields:
            if f.oneof:
                if f.oneof in emitted_oneofs:
                    continue
                emitted_oneofs.add(f.oneof)
                members = dict(m.oneofs)[f.oneof]
                L.append(f"    {m.case_type(f.oneof)} {f.oneof}_case;")
                L.append("    union {")
                for mf in members:
                    L += comment_block(mf.comment, "        ")
                    L.append(f"        {self.ctype(mf)} {mf.name};")
                L.append(f"    }} {f.oneof};")
                continue
            com = f.comment
            if f.type == FD.TYPE_ENUM:
                com = (f"{self.enum_of(f).cname}. " + com).strip()
            L += comment_block(com, "    ")
            if f.repeated:
                L.append(f"    const {self.ctype(f)} *{f.name};")
                L.append(f"    uint64_t {f.name}_count;")
            elif f.is_msg:
                L.append(f"    bool has_{f.name};")
                L.append(f"    {self.ctype(f)} {f.name};")
            else:
                L.append(f"    {self.ctype(f)} {f.name};")
        L.append("};")
        L.append("")
        return L

    # ---- source ----

    def source(self):
        L = self.banner("c")
        L += [f'#include "{self.base}.h"', "", "#include <stddef.h>", "#include <string.h>", ""]
        L += read_template("runtime.c.in").rstrip("\n").split("\n")
        L.append("")
        for e in self.enums:
            L += self.enum_funcs(e)
        for m in self.messages:
            n = m.cname[len(PREFIX):]
            L += decl(f"static pcclResult_t size_{n}(", [f"const {m.cname} *m", "uint64_t *out"],
                      ");")
            L += decl(f"static pcclResult_t write_{n}(", [f"const {m.cname} *m", "pb_enc *e"],
                      ");")
            L += decl(f"static pcclResult_t dec_{n}(", DEC_PARAMS + [f"{m.cname} *out"], ");")
        L.append("")
        L += self.put_sub_fns()
        for m in self.messages:
            L += self.size_fn(m)
            L += self.write_fn(m)
            L += self.dec_fn(m)
            L += self.public_fns(m)
        L += self.arena_bound()
        L += self.table()
        return "\n".join(L) + "\n"

    def enum_funcs(self, e):
        L = [f"bool {e.cname}_is_known(int32_t v)", "{", "    switch (v) {"]
        seen = set()
        for name, num, _ in e.values:
            if num in seen:
                continue
            seen.add(num)
            L.append(f"    case CCOIP_PB_{name}:")
        L += ["        return true;", "    default:", "        return false;", "    }", "}", ""]
        L += [f"const char *{e.cname}_name(int32_t v)", "{", "    switch (v) {"]
        seen = set()
        for name, num, _ in e.values:
            if num in seen:
                continue
            seen.add(num)
            L.append(f"    case CCOIP_PB_{name}:")
            L.append(f'        return "{name}";')
        L += ["    default:", "        return NULL;", "    }", "}", ""]
        return L

    def elem_size_expr(self, f, v):
        t = f.type
        if t == FD.TYPE_BOOL:
            return "1u"
        if t in (FD.TYPE_UINT32, FD.TYPE_UINT64):
            return f"pb_varint_size({v})"
        if t == FD.TYPE_ENUM:
            return f"pb_varint_size(pb_enum_wire({v}))"
        if t == FD.TYPE_FIXED64:
            return "8u"
        if t == FD.TYPE_FIXED32:
            return "4u"
        raise GenError("no element size")

    def put_elem(self, f, v):
        t = f.type
        if t == FD.TYPE_BOOL:
            return f"pb_put_varint(e, {v} ? 1u : 0u)"
        if t in (FD.TYPE_UINT32, FD.TYPE_UINT64):
            return f"pb_put_varint(e, {v})"
        if t == FD.TYPE_ENUM:
            return f"pb_put_varint(e, pb_enum_wire({v}))"
        if t == FD.TYPE_FIXED64:
            return f"pb_put_fixed64(e, {v})"
        if t == FD.TYPE_FIXED32:
            return f"pb_put_fixed32(e, {v})"
        raise GenError("no element writer")

    def nonzero(self, f, v):
        if f.type == FD.TYPE_BOOL:
            return v
        return f"{v} != 0"

    def size_fn(self, m):
        n = m.cname[len(PREFIX):]
        L = decl(f"static pcclResult_t size_{n}(", [f"const {m.cname} *m", "uint64_t *out"], ")")
        L += ["{", "    uint64_t s = 0;"]
        if not m.fields:
            L.append("    (void)m;")
        for oneof, members in m.oneofs:
            L.append(f"    switch (m->{oneof}_case) {{")
            L.append(f"    case {m.case_name(oneof)}:")
            for f in members:
                L.append(f"    case {m.case_name(oneof, f)}:")
            L += ["        break;", "    default:", "        return pcclInvalidArgument;", "    }"]
        for f in m.fields_by_number:
            v = self.value_ref(m, f)
            L.append(f"    /* {f.number}: {f.fd.name} */")
            if f.repeated:
                L.append(f"    if (m->{f.name}_count > 0 && m->{f.name} == NULL) "
                         "return pcclInvalidArgument;")
                ev = f"m->{f.name}[i]"
                if f.is_msg:
                    L += [f"    for (uint64_t i = 0; i < m->{f.name}_count; i++) {{",
                          "        uint64_t sub;",
                          f"        PB_TRY(size_{self.sub(f).cname[len(PREFIX):]}(&{ev}, &sub));",
                          f"        PB_TRY(pb_add_len_field(&s, {f.number}u, sub));", "    }"]
                elif f.is_bytes:
                    L += [f"    for (uint64_t i = 0; i < m->{f.name}_count; i++) {{",
                          f"        PB_TRY(pb_check_bytes({ev}, {f.utf8}));",
                          f"        PB_TRY(pb_add_len_field(&s, {f.number}u, {ev}.len));", "    }"]
                else:
                    L += [f"    if (m->{f.name}_count > 0) {{", "        uint64_t body = 0;",
                          f"        for (uint64_t i = 0; i < m->{f.name}_count; i++) {{"]
                    if f.type == FD.TYPE_ENUM:
                        L.append(f"            if (!{self.enum_of(f).cname}_is_known({ev})) "
                                 "return pcclInvalidArgument;")
                    L += [f"            PB_TRY(pb_add(&body, {self.elem_size_expr(f, ev)}));",
                          "        }", f"        PB_TRY(pb_add_len_field(&s, {f.number}u, body));",
                          "    }"]
            elif f.oneof:
                sn = self.sub(f).cname[len(PREFIX):]
                L += [f"    if (m->{f.oneof}_case == {m.case_name(f.oneof, f)}) {{",
                      "        uint64_t sub;",
                      f"        PB_TRY(size_{sn}(&{v}, &sub));",
                      f"        PB_TRY(pb_add_len_field(&s, {f.number}u, sub));", "    }"]
            elif f.is_msg:
                sn = self.sub(f).cname[len(PREFIX):]
                L += [f"    if (m->has_{f.name}) {{", "        uint64_t sub;",
                      f"        PB_TRY(size_{sn}(&{v}, &sub));",
                      f"        PB_TRY(pb_add_len_field(&s, {f.number}u, sub));", "    }"]
            elif f.is_bytes:
                L += [f"    PB_TRY(pb_check_bytes({v}, {f.utf8}));",
                      f"    if ({v}.len != 0) PB_TRY(pb_add_len_field(&s, {f.number}u, "
                      f"{v}.len));"]
            else:
                if f.type == FD.TYPE_ENUM:
                    L.append(f"    if (!{self.enum_of(f).cname}_is_known({v})) "
                             "return pcclInvalidArgument;")
                L.append(f"    if ({self.nonzero(f, v)}) {{")
                L.append(f"        PB_TRY(pb_add(&s, pb_tag_size({f.number}u) + "
                         f"{self.elem_size_expr(f, v)}));")
                L.append("    }")
        L += ["    *out = s;", "    return pcclSuccess;", "}", ""]
        return L

    def write_fn(self, m):
        n = m.cname[len(PREFIX):]
        L = decl(f"static pcclResult_t write_{n}(", [f"const {m.cname} *m", "pb_enc *e"], ")")
        L += ["{"]
        if not m.fields:
            L += ["    (void)m;", "    (void)e;"]
        for f in m.fields_by_number:
            v = self.value_ref(m, f)
            L.append(f"    /* {f.number}: {f.fd.name} */")
            wt = SCALARS[f.type][1] if not f.is_msg else "PB_WT_LEN"
            if f.repeated:
                ev = f"m->{f.name}[i]"
                if f.is_msg:
                    sn = self.sub(f).cname[len(PREFIX):]
                    L += [f"    for (uint64_t i = 0; i < m->{f.name}_count; i++) {{",
                          f"        PB_TRY(pb_put_sub_{sn}(e, {f.number}u, &{ev}));", "    }"]
                elif f.is_bytes:
                    L += [f"    for (uint64_t i = 0; i < m->{f.name}_count; i++) {{",
                          f"        PB_TRY(pb_put_bytes_field(e, {f.number}u, {ev}));", "    }"]
                else:
                    L += [f"    if (m->{f.name}_count > 0) {{",
                          "        uint64_t body = 0;",
                          f"        for (uint64_t i = 0; i < m->{f.name}_count; i++) {{",
                          f"            PB_TRY(pb_add(&body, {self.elem_size_expr(f, ev)}));",
                          "        }",
                          f"        PB_TRY(pb_put_tag(e, {f.number}u, PB_WT_LEN));",
                          "        PB_TRY(pb_put_varint(e, body));",
                          f"        for (uint64_t i = 0; i < m->{f.name}_count; i++) {{",
                          f"            PB_TRY({self.put_elem(f, ev)});",
                          "        }",
                          "    }"]
            elif f.oneof:
                sn = self.sub(f).cname[len(PREFIX):]
                L += [f"    if (m->{f.oneof}_case == {m.case_name(f.oneof, f)}) {{",
                      f"        PB_TRY(pb_put_sub_{sn}(e, {f.number}u, &{v}));", "    }"]
            elif f.is_msg:
                sn = self.sub(f).cname[len(PREFIX):]
                L += [f"    if (m->has_{f.name}) PB_TRY(pb_put_sub_{sn}(e, {f.number}u, &{v}));"]
            elif f.is_bytes:
                L += [f"    if ({v}.len != 0) PB_TRY(pb_put_bytes_field(e, {f.number}u, {v}));"]
            else:
                L += [f"    if ({self.nonzero(f, v)}) {{",
                      f"        PB_TRY(pb_put_tag(e, {f.number}u, {wt}));",
                      f"        PB_TRY({self.put_elem(f, v)});", "    }"]
        L += ["    return pcclSuccess;", "}", ""]
        return L

    def put_sub_fns(self):
        """pb_put_sub_<m>: tag, length and body of a sub-message, checked to agree."""
        L = []
        used = set()
        for m in self.messages:
            for f in m.fields:
                if f.is_msg:
                    used.add(f.type_name)
        for m in self.messages:
            if self.pkg + "." + m.proto_name not in used:
                continue
            n = m.cname[len(PREFIX):]
            L += decl(f"static pcclResult_t pb_put_sub_{n}(",
                      ["pb_enc *e", "uint32_t field", f"const {m.cname} *m"], ")")
            L += ["{", "    uint64_t sub, start;",
                  f"    PB_TRY(size_{n}(m, &sub));", "    PB_TRY(pb_put_tag(e, field, PB_WT_LEN));",
                  "    PB_TRY(pb_put_varint(e, sub));", "    start = e->pos;",
                  f"    PB_TRY(write_{n}(m, e));",
                  "    return e->pos - start == sub ? pcclSuccess : pcclInternalError;", "}", ""]
        return L

    def dec_fn(self, m):
        n = m.cname[len(PREFIX):]
        rep = [f for f in m.fields if f.repeated]
        singular = [f for f in m.fields if f.bit is not None]
        L = decl(f"static pcclResult_t dec_{n}(", DEC_PARAMS + [f"{m.cname} *out"], ")")
        L += ["{", "    uint64_t pos = 0;"]
        if singular:
            L.append("    uint64_t seen = 0;")
        L += ["    uint32_t field, wt;"]
        for f in rep:
            L.append(f"    uint64_t {f.name}_n = 0, {f.name}_i = 0;")
            L.append(f"    {self.ctype(f)} *{f.name}_buf = NULL;")
        L += ["    memset(out, 0, sizeof(*out));",
              "    if (depth > d->lim->max_depth) return pcclProtocolError;"]
        if rep:
            L += ["    /* Pass 1: count the elements of every repeated field. */",
                  "    while (pos < n) {", "        PB_TRY(pb_get_tag(p, n, &pos, &field, &wt));",
                  "        switch (field) {"]
            for f in sorted(rep, key=lambda f: f.number):
                ewt = "PB_WT_LEN" if f.is_msg else SCALARS[f.type][1]
                packable = "false" if (f.is_msg or f.is_bytes) else "true"
                L += [f"        case {f.number}u:",
                      f"            PB_TRY(pb_count(d, p, n, &pos, wt, {ewt}, {packable}, "
                      f"&{f.name}_n));",
                      "            break;"]
            L += ["        default:", "            PB_TRY(pb_skip(p, n, &pos, wt));",
                  "            break;", "        }", "    }"]
            for f in rep:
                ct = self.ctype(f)
                L += ["    {", "        void *mem;",
                      f"        const uint64_t size = sizeof({ct});",
                      f"        const uint64_t align = _Alignof({ct});",
                      f"        PB_TRY(pb_alloc(d, {f.name}_n, size, align, &mem));",
                      f"        {f.name}_buf = mem;", f"        out->{f.name} = {f.name}_buf;",
                      f"        out->{f.name}_count = {f.name}_n;", "    }"]
            L += ["    /* Pass 2: decode. */", "    pos = 0;"]
        L += ["    while (pos < n) {", "        PB_TRY(pb_get_tag(p, n, &pos, &field, &wt));",
              "        switch (field) {"]
        for f in m.fields_by_number:
            L.append(f"        case {f.number}u: {{ /* {f.fd.name} */")
            L += ["            " + x for x in self.dec_field(m, f)]
            L += ["            break;", "        }"]
        L += ["        default:", "            PB_TRY(pb_skip(p, n, &pos, wt));", "            break;",
              "        }", "    }"]
        for f in rep:
            L.append(f"    if ({f.name}_i != {f.name}_n) return pcclInternalError;")
        L += ["    return pcclSuccess;", "}", ""]
        return L

    def dec_field(self, m, f):
        L = []
        if f.repeated:
            ct = self.ctype(f)
            take = [f"if ({f.name}_i >= {f.name}_n) return pcclInternalError;",
                    f"dst = &{f.name}_buf[{f.name}_i++];"]
            L.append(f"{ct} *dst;")
            if f.is_msg:
                sn = self.sub(f).cname[len(PREFIX):]
                L += ["uint64_t off, len;", "PB_TRY(pb_get_len(p, n, &pos, wt, &off, &len));"]
                L += take + [f"PB_TRY(dec_{sn}(d, p + off, len, depth + 1u, dst));"]
            elif f.is_bytes:
                L += take + [f"PB_TRY(pb_bytes_field(d, p, n, &pos, wt, {f.utf8}, dst));"]
            else:
                r = SCALARS[f.type][2]
                L += ["if (wt == PB_WT_LEN) {", "    uint64_t off, len, q;",
                      "    PB_TRY(pb_get_len(p, n, &pos, wt, &off, &len));",
                      "    for (q = off; q < off + len;) {"]
                L += ["        " + x for x in take]
                L += [f"        PB_TRY(pb_elem_{r}(p, off + len, &q, dst));", "    }", "} else {"]
                L += ["    " + x for x in take]
                L += [f"    PB_TRY(pb_scalar_{r}(p, n, &pos, wt, dst));", "}"]
            return L
        v = self.value_ref(m, f, "out")
        if f.oneof:
            sn = self.sub(f).cname[len(PREFIX):]
            L += [f"{self.ctype(f)} *dst = &{v};", "uint64_t off, len;",
                  f"if (out->{f.oneof}_case != {m.case_name(f.oneof)}) return pcclProtocolError;",
                  "PB_TRY(pb_get_len(p, n, &pos, wt, &off, &len));",
                  f"PB_TRY(dec_{sn}(d, p + off, len, depth + 1u, dst));",
                  f"out->{f.oneof}_case = {m.case_name(f.oneof, f)};"]
            return L
        L.append(f"PB_TRY(pb_mark(&seen, {f.bit}u));")
        if f.is_msg:
            sn = self.sub(f).cname[len(PREFIX):]
            L += ["uint64_t off, len;", "PB_TRY(pb_get_len(p, n, &pos, wt, &off, &len));",
                  f"PB_TRY(dec_{sn}(d, p + off, len, depth + 1u, &{v}));",
                  f"out->has_{f.name} = true;"]
        elif f.is_bytes:
            L.append(f"PB_TRY(pb_bytes_field(d, p, n, &pos, wt, {f.utf8}, &{v}));")
        else:
            L.append(f"PB_TRY(pb_scalar_{SCALARS[f.type][2]}(p, n, &pos, wt, &{v}));")
        return L

    def public_fns(self, m):
        c = m.cname
        n = c[len(PREFIX):]
        L = decl(f"pcclResult_t {c}_encoded_size(", [f"const {c} *m", "uint64_t *size_out"], ")")
        L += ["{", "    if (m == NULL || size_out == NULL) return pcclInvalidArgument;",
              f"    return size_{n}(m, size_out);", "}", ""]
        L += decl(f"pcclResult_t {c}_encode(", ENC_PARAMS(c), ")")
        L += ["{", "    uint64_t size;", "    pb_enc e;", "    if (len_out != NULL) *len_out = 0;",
              "    if (m == NULL) return pcclInvalidArgument;", f"    PB_TRY(size_{n}(m, &size));",
              "    PB_TRY(pb_enc_begin(&e, buf, cap, size, len_out));",
              f"    PB_TRY(write_{n}(m, &e));",
              "    return e.pos == size ? pcclSuccess : pcclInternalError;", "}", ""]
        L += decl(f"pcclResult_t {c}_decode(", DECODE_PARAMS + [f"{c} *out"], ")")
        L += ["{", "    pb_dec d;", "    ccoip_pb_limits def;",
              "    if (out == NULL) return pcclInvalidArgument;",
              "    PB_TRY(pb_dec_begin(&d, buf, len, lim, arena, &def));",
              f"    return dec_{n}(&d, buf, len, 0, out);", "}", ""]
        return L

    def arena_bound(self):
        L = ["/* Arena bytes per input byte for elements of type T taking at least w input bytes. */",
             "#define PB_FACTOR(T, w) pb_factor(sizeof(T), _Alignof(T), w)", "",
             "uint64_t ccoip_pb_arena_bound(uint64_t input_len)", "{", "    uint64_t f = 1;"]
        for m in self.messages:
            for f in m.fields:
                if not f.repeated:
                    continue
                ct = self.ctype(f)
                L.append(f"    /* {m.proto_name}.{f.fd.name} */")
                L.append(f"    f = pb_max_u64(f, PB_FACTOR({ct}, {MIN_WIRE[f.type]}u));")
        L += ["    if (input_len > (UINT64_MAX - 64u) / f) return UINT64_MAX;",
              "    return input_len * f + 64u;", "}", ""]
        return L

    def table(self):
        L = []
        for m in self.messages:
            c = m.cname
            n = c[len(PREFIX):]
            L += decl(f"static pcclResult_t any_size_{n}(", ["const void *m", "uint64_t *size_out"],
                      ")")
            L += ["{", f"    return {c}_encoded_size(m, size_out);", "}", ""]
            L += decl(f"static pcclResult_t any_encode_{n}(", ENC_PARAMS("void")[:1] + ENC_PARAMS(
                "void")[1:], ")")
            L += ["{", f"    return {c}_encode(m, buf, cap, len_out);", "}", ""]
            L += decl(f"static pcclResult_t any_decode_{n}(", DECODE_PARAMS + ["void *out"], ")")
            L += ["{", f"    return {c}_decode(buf, len, lim, arena, out);", "}", ""]
        L.append("const ccoip_pb_message_desc ccoip_pb_messages[CCOIP_PB_MESSAGE_COUNT] = {")
        for m in self.messages:
            n = m.cname[len(PREFIX):]
            L += pack("    {", "     ", [f'"{m.full_name}"', f"sizeof({m.cname})", f"any_size_{n}",
                                         f"any_encode_{n}", f"any_decode_{n}"], "},")
        L += ["};", "",
              "const ccoip_pb_message_desc *ccoip_pb_find_message(const char *name)", "{",
              "    if (name == NULL) return NULL;",
              "    for (uint32_t i = 0; i < CCOIP_PB_MESSAGE_COUNT; i++) {",
              "        if (strcmp(ccoip_pb_messages[i].name, name) == 0) return "
              "&ccoip_pb_messages[i];",
              "    }", "    return NULL;", "}"]
        return L


def read_template(name):
    with open(os.path.join(TEMPLATES, name), encoding="utf-8") as fh:
        return fh.read()


def generate(request):
    response = plugin_pb2.CodeGeneratorResponse()
    files = {f.name: f for f in request.proto_file}
    for name in request.file_to_generate:
        g = Gen(files[name])
        src = g.source()
        for suffix, text in ((".h", g.header()), (".c", src)):
            out = response.file.add()
            out.name = g.base + suffix
            out.content = text
    return response


def main():
    request = plugin_pb2.CodeGeneratorRequest.FromString(sys.stdin.buffer.read())
    try:
        response = generate(request)
    except GenError as exc:
        response = plugin_pb2.CodeGeneratorResponse()
        response.error = str(exc)
    sys.stdout.buffer.write(response.SerializeToString())


if __name__ == "__main__":
    main()
