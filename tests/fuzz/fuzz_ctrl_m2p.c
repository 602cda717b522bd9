/* fuzz_ctrl_m2p — control frames the master sends (ccoip_ctrl_decode_m2p). See fuzz_ctrl.h. */
#define FUZZ_CTRL_MSG    ccoip_pb_master_to_peer
#define FUZZ_CTRL_DECODE ccoip_ctrl_decode_m2p
#define FUZZ_CTRL_ENCODE ccoip_ctrl_encode_m2p
#include "fuzz_ctrl.h"
