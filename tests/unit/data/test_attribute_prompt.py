"""AttributePrompt.encode: whole class indices only (a fractional label is refused, never truncated)."""

import pytest
import torch

from conceptlab.data.attribute_prompt import AttributePrompt

PROMPT = AttributePrompt(("wall_hue", "shape"), (10, 4))


def test_whole_labels_of_any_dtype_encode_alike():
    as_long = PROMPT.encode(torch.tensor([[1, 2], [9, 0]]))
    assert torch.equal(PROMPT.encode(torch.tensor([[1.0, 2.0], [9.0, 0.0]], dtype=torch.float64)), as_long)
    assert as_long[0].nonzero().flatten().tolist() == [1, 12]


@pytest.mark.parametrize("bad", [[1.7, 2.0], [1.0, float("nan")]])
def test_a_fractional_label_is_refused(bad):
    with pytest.raises(ValueError, match="labels must be whole class indices, got (1.7|nan)"):
        PROMPT.encode(torch.tensor([bad]))
