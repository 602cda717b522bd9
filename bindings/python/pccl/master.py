"""Runs a master in this process: python3 -m pccl.master --listen-address 0.0.0.0:48148"""

import argparse
import sys

from ._core import MasterNode


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m pccl.master", description=__doc__)
    ap.add_argument("--listen-address", default="0.0.0.0:48148",
                    help="ip:port (port 0: any) or a URL such as tcp://127.0.0.1:0")
    ap.add_argument("--heartbeat-ms", type=int, default=0)
    ap.add_argument("--evict-ms", type=int, default=0)
    ap.add_argument("--vote-timeout-ms", type=int, default=0)
    ap.add_argument("--max-peers", type=int, default=0)
    args = ap.parse_args(argv)
    master = MasterNode(args.listen_address, heartbeat_ms=args.heartbeat_ms,
                        evict_ms=args.evict_ms, vote_timeout_ms=args.vote_timeout_ms,
                        max_peers=args.max_peers)
    master.run()
    print(f"PORT {master.port}", flush=True)
    master.serve_forever()  # until SIGINT / SIGTERM
    return 0


if __name__ == "__main__":
    sys.exit(main())
