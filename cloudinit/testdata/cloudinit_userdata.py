"""Read user-data the way cloud-init does, with cloud-init's own modules.

Usage: cloudinit_userdata.py USER_DATA_FILE WORK_DIR
       cloudinit_userdata.py --detect          (JSON list of base64 payloads on stdin)
       cloudinit_userdata.py --shellify KEY    (a cloud-config on stdin)

Prints JSON. For a user-data file:
  parts:        every leaf part, as handlers.walk hands it to part handlers
                (content type, payload in base64);
  cloud_config: the cloud-config that CloudConfigPartHandler merges from the
                cloud-config parts and writes to cloud-config.txt, or null.
With --detect: handlers.type_from_starts_with for each payload (null when none
matches), as user_data.UserDataProcessor calls it on a text/plain part.
With --shellify: the sh script cc_bootcmd (KEY bootcmd) or cc_runcmd (KEY
runcmd) writes from that key of the cloud-config, via util.shellify.

Run it with the interpreter of /usr/bin/cloud-init (Debian: /usr/bin/python3),
which imports cloudinit from /usr/lib/python3/dist-packages.
"""

import base64
import json
import os
import sys

from cloudinit import handlers, helpers, user_data, util
from cloudinit.handlers.cloud_config import CloudConfigPartHandler
from cloudinit.settings import PER_INSTANCE


class Paths:
    """The slice of cloudinit.helpers.Paths the code paths below use."""

    def __init__(self, work):
        self.work = work

    def get_ipath_cur(self, name=None):
        return os.path.join(self.work, "instance", name or "")

    def get_cpath(self, name=None):
        return os.path.join(self.work, name or "")

    def get_ipath(self, name=None):
        if name == "cloud_config":
            return os.path.join(self.work, "cloud-config.txt")
        return os.path.join(self.work, "instance", name or "")


def as_bytes(payload):
    if isinstance(payload, str):
        return payload.encode("utf-8", "surrogateescape")
    return payload


def parse(path, work):
    with open(path, "rb") as f:
        raw = f.read()
    paths = Paths(work)
    msg = user_data.UserDataProcessor(paths).process(raw)

    parts = []

    def collect(_data, filename, payload, headers):
        parts.append(
            {
                "type": headers["Content-Type"],
                "filename": filename,
                "payload": base64.b64encode(as_bytes(payload)).decode(),
            }
        )

    handlers.walk(msg, collect, data=None)

    # Merge the cloud-config parts exactly as Init._do_handlers does.
    cc = CloudConfigPartHandler(paths)
    registry = helpers.ContentHandlers()
    registry.register(cc)
    registry.initialized.append(cc)
    handlers.call_begin(cc, None, PER_INSTANCE)
    handlers.walk(
        msg,
        handlers.walker_callback,
        data={
            "handlers": registry,
            "handlerdir": os.path.join(work, "handlers"),
            "data": None,
            "frequency": PER_INSTANCE,
            "handlercount": 0,
            "excluded": [],
        },
    )
    handlers.call_end(cc, None, PER_INSTANCE)
    merged = None
    fn = os.path.join(work, "cloud-config.txt")
    if os.path.exists(fn) and os.path.getsize(fn) > 0:
        merged = util.load_yaml(util.load_file(fn))
    print(json.dumps({"parts": parts, "cloud_config": merged}))


def detect():
    out = []
    for b64 in json.load(sys.stdin):
        payload = base64.b64decode(b64).decode("utf-8", "surrogateescape")
        out.append(handlers.type_from_starts_with(payload))
    print(json.dumps(out))


def shellify(key):
    cfg = util.load_yaml(sys.stdin.read())
    sys.stdout.write(util.shellify(cfg[key]))


if __name__ == "__main__":
    if sys.argv[1] == "--detect":
        detect()
    elif sys.argv[1] == "--shellify":
        shellify(sys.argv[2])
    else:
        parse(sys.argv[1], sys.argv[2])
