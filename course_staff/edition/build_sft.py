"""Rebuild the shipped SFT checkpoint, deterministically, in a few seconds.

    python -m course_staff.edition.build_sft    # writes course_utils/data/sft.pt and sft.json

sft.json records how the checkpoint was made and on which machine (``runtime.machine_record``):
another CPU rebuilds the same greedy answers and logits within float32 rounding, not the same bits.

The demonstrators are sloppy on purpose: a fifth of their answers are blank (just EOS). The SFT
model therefore adds well but not perfectly and sometimes answers nothing, which leaves RLHF room
both to help and to hurt.
"""

import argparse
import hashlib
import json
import math
import random
from pathlib import Path

import torch

from course_utils.runtime import machine_record
from course_utils.tinylm import EOS, PAD, SFT_PATH, MAX_NEW, TinyLM, answer_tokens, encode_prompts, \
    make_batch, supervised_loss

BLANK_RATE = 0.2


def sloppy_demonstrations(n, rng):
    """n prompts (B, 5) and demonstrated responses (B, MAX_NEW): correct, or blank with prob 0.2."""
    prompts, _ = make_batch(n, rng)
    ids, _ = encode_prompts(prompts)
    target = answer_tokens(ids)
    blank = torch.tensor([rng.random() < BLANK_RATE for _ in range(n)])
    blank_row = torch.tensor([EOS] + [PAD] * (MAX_NEW - 1))
    target[blank] = blank_row
    return ids, target


def train_sft(seed=0, steps=800, batch=64, lr=3e-3):
    """Train a TinyLM on sloppy demonstrations (Adam, cosine decay). Returns the model."""
    torch.manual_seed(seed)
    rng = random.Random(seed)
    model = TinyLM()
    opt = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    for _ in range(steps):
        ids, target = sloppy_demonstrations(batch, rng)
        loss = supervised_loss(model, ids, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(SFT_PATH))
    args = parser.parse_args()
    model = train_sft(args.seed)
    torch.save(model.state_dict(), args.out)
    record = record_path(args.out)
    record.write_text(json.dumps({"made by": "python -m course_staff.edition.build_sft", "seed": args.seed,
                                  "sha256": checkpoint_digest(args.out), "made on": machine_record()}, indent=1) + "\n")
    print(f"wrote {args.out} and {record}")


def record_path(checkpoint=SFT_PATH):
    """The JSON file beside a checkpoint that says how and where it was made."""
    return Path(checkpoint).with_suffix(".json")


def checkpoint_digest(checkpoint=SFT_PATH):
    return hashlib.sha256(Path(checkpoint).read_bytes()).hexdigest()


if __name__ == "__main__":
    main()
