/*
 * abi_layout.c — the rows of abi_rows.h as pccl.h declares the types.
 */
#include "pccl.h"

#include "abi_rows.h"

const abi_struct_row abi_pccl_structs[] = ABI_STRUCT_ROWS;
const size_t abi_pccl_nstructs = sizeof abi_pccl_structs / sizeof abi_pccl_structs[0];
const abi_enum_row abi_pccl_enums[] = ABI_ENUM_ROWS;
const size_t abi_pccl_nenums = sizeof abi_pccl_enums / sizeof abi_pccl_enums[0];
