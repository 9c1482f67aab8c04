"""Write a logits golden in the seed's format (testdata/seed-v1/golden/ref_logits.json):
{"prompt_ids", "argmax", "vocab", "logits_bits"} -- the float32 bits of the logits at the LAST
position of one forward over the ids, from the float64 reference -- plus "layers" when only the
first N layers are run (what `k3 verify --logits --layers N` compares with).

usage: /usr/bin/python3 tools/reference/make_golden.py MODEL_DIR OUT_DIR [ids=3,4,5,6,7] [layers=0]
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from k3ref import K3Model, argmax_first  # noqa: E402


def main():
    model_dir, out_dir = sys.argv[1], sys.argv[2]
    ids = [int(x) for x in sys.argv[3].split(",")] if len(sys.argv) > 3 else [3, 4, 5, 6, 7]
    layers = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    m = K3Model.load(model_dir)
    if layers:
        assert 0 < layers <= m.cfg.num_hidden_layers
        m.cfg.num_hidden_layers = layers        # the forward runs the first N layers, then the head
        m.layers = m.layers[:layers]
    lg = m.forward(ids)[-1]
    f32 = np.asarray(lg, dtype=np.float64).astype(np.float32)
    out = {"prompt_ids": ids, "argmax": argmax_first(lg), "vocab": int(f32.shape[0]),
           "logits_bits": [int(b) for b in f32.view(np.uint32)]}
    if layers:
        out["layers"] = layers
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "ref_logits.json"), "w") as f:
        json.dump(out, f)
    print("wrote", os.path.join(out_dir, "ref_logits.json"), "argmax", out["argmax"])


if __name__ == "__main__":
    main()
