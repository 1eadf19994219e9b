"""Closed-loop load against one URL from Python, CONCURRENCY requests in
flight for SECONDS; prints `<requests per second> req/s`.

  client.py cumulo SOCKET NAME URL CONCURRENCY SECONDS
      the Python SDK, one unmanaged instance keeping CONCURRENCY send_async
      calls to NAME (an http_client service's `<prefix>get`) in flight;
  client.py urllib3 URL CONCURRENCY SECONDS
      the same load with urllib3: CONCURRENCY threads sharing one
      PoolManager of as many keep-alive connections.
"""
import sys
import threading
import time


def with_cumulo(socket_path, name, url, concurrency, seconds):
    import cumulo

    api = cumulo.API(address=socket_path, prefix="/bench/py/", window=1)
    info = cumulo.info_encode([("url", url)])
    for _ in range(concurrency):
        api.send_async(name, b"", info, timeout=10000)
    done = bad = 0
    in_flight = concurrency
    end = time.monotonic() + seconds
    while in_flight:
        r = api.recv_async(timeout=10000)
        in_flight -= 1
        if r.status == 0 and cumulo.info_dict(r.response_info).get("status") == "200":
            done += 1
        else:
            bad += 1
        if time.monotonic() < end:
            api.send_async(name, b"", info, timeout=10000)
            in_flight += 1
    return done, bad


def with_urllib3(url, concurrency, seconds):
    import urllib3

    pool = urllib3.PoolManager(maxsize=concurrency, block=True)
    counts = [[0, 0] for _ in range(concurrency)]
    end = time.monotonic() + seconds

    def work(mine):
        while time.monotonic() < end:
            r = pool.request("GET", url, retries=False)
            mine[0 if r.status == 200 else 1] += 1

    threads = [threading.Thread(target=work, args=(c,)) for c in counts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    if mode == "cumulo" and len(argv) == 7:
        seconds = float(argv[6])
        done, bad = with_cumulo(argv[2], argv[3], argv[4], int(argv[5]), seconds)
    elif mode == "urllib3" and len(argv) == 5:
        seconds = float(argv[4])
        done, bad = with_urllib3(argv[2], int(argv[3]), seconds)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    if bad:
        print("client.py: %d requests failed or were not 200" % bad, file=sys.stderr)
    print("%.0f req/s" % (done / seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
