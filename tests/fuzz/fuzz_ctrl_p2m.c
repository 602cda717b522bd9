/* fuzz_ctrl_p2m — control frames a peer sends (ccoip_ctrl_decode_p2m). See fuzz_ctrl.h. */
#define FUZZ_CTRL_MSG    ccoip_pb_peer_to_master
#define FUZZ_CTRL_DECODE ccoip_ctrl_decode_p2m
#define FUZZ_CTRL_ENCODE ccoip_ctrl_encode_p2m
#include "fuzz_ctrl.h"
