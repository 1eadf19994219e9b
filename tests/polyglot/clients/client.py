"""Unmanaged client: client.py SOCKET NAME HEX_BODY [sync|async]

Prints the hex response_info, a newline and the response body; on an error
status prints its name, a newline and the message, and exits 3.
"""

import sys

import cumulo


def main() -> int:
    socket, name, body_hex = sys.argv[1:4]
    mode = sys.argv[4] if len(sys.argv) > 4 else "sync"
    with cumulo.API(address=socket, prefix="/client/python/") as api:
        try:
            if mode == "async":
                r = api.recv_async(api.send_async(name, bytes.fromhex(body_hex)))
                if r.status != cumulo.Status.OK:
                    raise cumulo.CumuloError(r.status, r.response.decode(errors="replace"))
                info, body = r.response_info, r.response
            else:
                info, body = api.send_sync(name, bytes.fromhex(body_hex))
        except cumulo.CumuloError as e:
            sys.stdout.buffer.write(e.status.name.encode() + b"\n" + e.message.encode())
            return 3
    sys.stdout.buffer.write(info.hex().encode() + b"\n" + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
