"""memsettle: wait until the memory a finished process freed has been handed
back to the host, so it does not happen during a timed run.

On a virtual machine with free page reporting (virtio-balloon), the guest
kernel reports freed 2 MB pages to the host a second or two after they are
freed, in a kernel worker that takes a CPU while it runs. On a 2-vCPU KVM
guest a freed 1.9 GB buffer slowed the tg runs that overlapped its reports
by 8-17%. A benchmark that starts a process right after another ended (one
engine after the other) would time that work against whichever ran next.

Where the kernel exposes the reporting counter
(/sys/module/page_reporting/parameters/reported_kib), settle() polls it
until it has not moved for QUIET seconds; elsewhere it sleeps FALLBACK
seconds (the reporting delay is 2 s)."""
import pathlib
import time

COUNTER = pathlib.Path("/sys/module/page_reporting/parameters/reported_kib")
QUIET, FALLBACK, LIMIT = 3.5, 4.0, 60.0


def _read():
    try:
        return int(COUNTER.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def settle():
    """Returns the seconds waited."""
    t0 = time.monotonic()
    last = _read()
    if last is None:
        if not COUNTER.parent.exists():  # no free page reporting here: nothing to wait for
            return 0.0
        time.sleep(FALLBACK)
        return time.monotonic() - t0
    quiet_since = t0
    while time.monotonic() - t0 < LIMIT:
        time.sleep(0.25)
        now = _read()
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= QUIET:
            break
    return time.monotonic() - t0
