"""
The embedded default's architecture (src/families/wan/default-spec.ts ``defaultModelSpec``) and tokenizer words
(``DEFAULT_WORDS``), as the training recipe needs them.

The words are read from the TypeScript source so the two cannot drift; the spec is mirrored here (the trained
model's ``model.json``) and tools/train/check-model-dir.ts checks that a written model directory has
exactly ``defaultModelSpec()``'s architecture.
"""

from __future__ import annotations

import copy
import os
import re
from typing import List

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_SPEC_TS = os.path.join(ROOT, "src", "families", "wan", "default-spec.ts")


def default_words() -> List[str]:
    """``DEFAULT_WORDS`` of src/families/wan/default-spec.ts, in order (the tokenizer's word ids are 259 + index)."""
    with open(DEFAULT_SPEC_TS, encoding="utf-8") as f:
        src = f.read()
    body = re.search(r"DEFAULT_WORDS: readonly string\[\] = \[(.*?)\];", src, re.S)
    if body is None:
        raise ValueError(f"{DEFAULT_SPEC_TS}: DEFAULT_WORDS not found")
    return re.findall(r"'([^']*)'", body.group(1))


def default_spec() -> dict:
    """``defaultModelSpec()`` as a model.json dict (weights 'seeded'; the trainer sets 'trained' and the VAE statistics)."""
    dim = 256
    words = default_words()
    return copy.deepcopy(
        {
            "id": "omnirx-default",
            "family": "wan-t2v",
            "description": "",
            "weights": "seeded",
            "textEncoder": {
                "vocabSize": 259 + len(words),
                "dModel": dim,
                "dKv": 64,
                "numHeads": 4,
                "dFf": 512,
                "numLayers": 2,
                "relativeAttentionNumBuckets": 32,
                "relativeAttentionMaxDistance": 128,
                "eps": 1e-6,
                "maxLength": 32,
            },
            "transformer": {
                "patchSize": [1, 2, 2],
                "inChannels": 16,
                "outChannels": 16,
                "dim": dim,
                "ffnDim": 1024,
                "numHeads": 4,
                "numLayers": 6,
                "textDim": dim,
                "freqDim": 256,
                "eps": 1e-6,
                "ropeTheta": 10000,
                "action": {"numKeys": 5, "vectorDim": 2},
            },
            "vae": {"zDim": 16, "channels": [64, 32, 16], "numResBlocks": 1, "temporalKernel": 3, "latentsMean": [0.0] * 16, "latentsStd": [1.0] * 16},
            "defaults": {"width": 64, "height": 64, "numFrames": 16, "fps": 8, "numInferenceSteps": 20, "guidanceScale": 3, "guidanceInterval": [0, 0.15], "flowShift": 3, "world": {"eta": 1}},
        }
    )
