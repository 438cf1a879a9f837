"""Running a test's calls from several threads at once."""

import threading


def failures_in_threads(work, threads=4):
    """Runs work() in `threads` threads at once and waits for them; returns repr() of each
    exception a thread's work raised (empty when every thread finished)."""
    failures = []

    def guarded():
        try:
            work()
        except Exception as e:  # reported to the caller
            failures.append(repr(e))

    started = [threading.Thread(target=guarded) for _ in range(threads)]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
    return failures
