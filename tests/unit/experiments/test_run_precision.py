"""The precision a run's numbers were made in (`provenance.run_precision`), from its invocation records: one name
when every invocation that trained or measured ran in one precision, `mixed: …` when a resume on another machine
(`train.bf16: null` follows the machine) or a training lent by another run changed it — on records written by hand."""

from conceptlab.experiments.provenance import run_code_drift, run_precision, training_precisions

BF16, FP32 = {"bf16": True}, {"bf16": False}


def _inv(precision: dict, trained=None, measured=0, **more) -> dict:
    return {**precision, "trained": trained, "measured": measured, **more}


def test_one_precision_throughout_is_named_as_such():
    assert run_precision([_inv(FP32, trained=[0, 20], measured=2)]) == "fp32"
    assert run_precision([_inv(BF16, trained=[0, 10], measured=1), _inv(BF16, trained=[10, 20], measured=1)]) \
        == "bf16 autocast"


def test_a_resume_in_another_precision_makes_the_run_mixed():
    trained_fp32 = _inv(FP32, trained=[0, 20], measured=1)
    assert run_precision([trained_fp32, _inv(BF16, measured=1)]) == \
        "mixed: trained in fp32, evaluated in bf16 autocast + fp32"
    assert run_precision([_inv(BF16, trained=[0, 10]), _inv(FP32, trained=[10, 20], measured=2)]) == \
        "mixed: trained in bf16 autocast + fp32, evaluated in fp32"


def test_an_earlier_invocation_that_did_nothing_does_not_count_but_the_last_one_always_does():
    idle = _inv(BF16)  # found the run done: trained nothing, measured nothing
    assert run_precision([_inv(FP32, trained=[0, 20], measured=2), idle, _inv(FP32)]) == "fp32"
    # the last invocation wrote the summary (its tables and figures): it evaluated, whatever it measured
    assert run_precision([_inv(FP32, trained=[0, 20], measured=2), _inv(BF16)]) == \
        "mixed: trained in fp32, evaluated in bf16 autocast + fp32"


def test_an_invocation_that_did_not_record_its_work_may_have_done_anything():
    killed = {"bf16": True}  # killed before it wrote what it did (or written by older code)
    assert training_precisions([killed]) == {"bf16 autocast"}
    assert run_precision([killed, _inv(FP32, trained=[10, 20], measured=2)]) == \
        "mixed: trained in bf16 autocast + fp32, evaluated in bf16 autocast + fp32"
    assert run_precision([{"host": "old"}, _inv(FP32, trained=[0, 20], measured=2)]) == "fp32"  # says no precision
    assert run_precision([]) is None and run_precision([{"host": "old"}]) is None


def test_a_lent_training_is_the_lenders_precision():
    lender = [_inv(BF16, trained=[0, 20], measured=2), _inv(FP32, measured=1)]  # its later evaluation trained nothing
    assert training_precisions(lender) == {"bf16 autocast"}
    own = [_inv(FP32, measured=2)]  # this run evaluated the lent checkpoints
    assert run_precision(own, lent=lender) == "mixed: trained in bf16 autocast, evaluated in fp32"
    assert run_precision([_inv(BF16, measured=2)], lent=lender) == "bf16 autocast"


def test_a_malformed_record_says_nothing_rather_than_failing():
    """A provenance file edited by hand or damaged: entries that are not records name no precision."""
    assert run_precision(["junk", 3, _inv(FP32, trained=[0, 20], measured=2)]) == "fp32"
    assert training_precisions([None, "x"]) == set()


def test_an_invocation_refused_before_any_work_lends_the_run_neither_its_precision_nor_its_drift():
    """What the run driver records for an invocation an error ended before it did anything (a damaged file refused):
    `trained: None, measured: 0`; one killed before it recorded its work may have done anything."""
    refused = _inv(BF16, code_drift=["study:shapes"])
    trained, last = _inv(FP32, trained=[0, 20], measured=2, code_drift=[]), _inv(FP32, code_drift=[])
    assert run_precision([trained, refused, last]) == "fp32"
    assert run_code_drift([trained, refused, last]) == []
    killed = {"bf16": True, "code_drift": ["study:shapes"]}
    assert run_code_drift([trained, killed, last]) == ["study:shapes"]
    assert run_code_drift([trained, _inv(FP32, measured=1, code_drift=["training"]), last]) == ["training"]
    assert run_code_drift([trained, refused]) == ["study:shapes"]  # the last wrote the summary: it always counts
    assert run_code_drift([{"host": "old"}, "junk"]) is None
