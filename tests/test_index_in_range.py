"""opgen.dsl.checks.index_in_range: the device check of an integer index input (a loss's class index, an
embedding's row) that NLLLoss, CrossEntropyLoss(Grad) and Embedding declare, run by the interpreter before it
evaluates (the kernel traps where it reads the index)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opgen.dsl.checks import index_in_range
from opgen.errors import ValidationError
from opgen.interp import interpret
from opgen.registry import load_spec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "specs"


def test_the_rule_on_arrays():
    """In range, out of range on either side, the ignored value, several dims (the flat index), an absent input."""
    f = index_in_range("t", "C", ignore="skip")
    assert f({"t": np.array([0, 4, -7])}, {"C": 5}, {"skip": -7}) is None
    assert f({"t": np.array([0, 5, 9])}, {"C": 5}, {"skip": -7}) == "t[1] = 5 is outside [0, 5) and is not skip -7"
    assert f({"t": np.array([-1])}, {"C": 5}, {"skip": -7}) == "t[0] = -1 is outside [0, 5) and is not skip -7"
    g = index_in_range("idx", "V")
    assert g({"idx": np.array([[0, 1], [2, 3]])}, {"V": 3}, {}) == "idx[3] (flat) = 3 is outside [0, 3)"
    assert g({"idx": None}, {"V": 3}, {}) is None
    with pytest.raises(KeyError):   # a misspelt input name is no check silently skipped
        g({"indices": np.array([0])}, {"V": 3}, {})
    with pytest.raises(TypeError, match="index_in_range: dim must be a name"):
        index_in_range("idx", 3)


@pytest.mark.parametrize("stem, inputs, bad, message", [
    ("nll_loss", lambda r: {"self": r.standard_normal((4, 6)).astype(np.float32), "target": np.array([0, 5, 2, 1]),
                            "weight": np.ones(6, np.float32)},
     ("target", 2, 6), "target: target[2] = 6 is outside [0, 6) and is not ignoreIndex -100"),
    ("cross_entropy_loss", lambda r: {"input": r.standard_normal((4, 6)).astype(np.float32),
                                      "target": np.array([0, 5, 2, 1])},
     ("target", 1, -3), "target: target[1] = -3 is outside [0, 6) and is not ignore_index -100"),
    ("embedding", lambda r: {"weight": r.standard_normal((5, 8)).astype(np.float32),
                             "indices": np.array([[0, 4], [1, 2]])},
     ("indices", (1, 1), 5), "indices: indices[3] (flat) = 5 is outside [0, 5)"),
    ("cross_entropy_loss_grad", lambda r: {"gradLoss": r.standard_normal(4).astype(np.float32),
                                           "logProb": r.standard_normal((4, 6)).astype(np.float32),
                                           "target": np.array([0, 5, 2, 1])},
     ("target", 3, 6), "target: target[3] = 6 is outside [0, 6) and is not ignoreIndex -100")])
def test_the_examples_refuse_an_index_out_of_range_and_take_the_ignored_one(stem, inputs, bad, message):
    """Each example's interpreter refuses the bad index naming the input, its flat position and value (the rule's
    text as each example printed it before the factory); an ignored target (-100) passes."""
    spec = load_spec(str(EXAMPLES / f"{stem}.py"))
    attrs = {"reduction": "none"} if stem == "cross_entropy_loss" else {}
    x = inputs(np.random.default_rng(0))
    interpret(spec, x, attrs=attrs, mode="exact")
    name, at, value = bad
    x[name][at] = value
    with pytest.raises(ValidationError) as e:
        interpret(spec, x, attrs=attrs, mode="exact")
    assert str(e.value) == message
    if name == "target":
        x[name][at] = -100
        interpret(spec, x, attrs=attrs, mode="exact")
