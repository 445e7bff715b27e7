"""0013 (F15): OpInfo dtype lists reach the PrivateUse1 backend."""

import copy

import pytest
import torch

pytestmark = pytest.mark.torch_patch("0013")


@pytest.fixture(scope="module")
def op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def test_backend_can_follow_cuda_dtype_lists(neuron, op_db, monkeypatch):
    monkeypatch.setenv("PYTORCH_TESTING_PRIVATEUSE1_DTYPES_LIKE", "cuda")
    widened = [op.full_name for op in op_db if torch.bfloat16 in op.supported_dtypes("cuda")
               and torch.bfloat16 not in op.dtypes]
    assert widened, "op_db has no op whose CUDA dtypes add bfloat16 to the CPU ones"
    forward = [op.full_name for op in op_db if op.supported_dtypes("neuron") != op.supported_dtypes("cuda")]
    backward = [op.full_name for op in op_db
                if op.supported_backward_dtypes("neuron") != op.supported_backward_dtypes("cuda")]
    assert not forward, f"{len(forward)} ops differ from CUDA's dtypes, e.g. {forward[:5]}"
    assert not backward, f"{len(backward)} ops differ from CUDA's backward dtypes, e.g. {backward[:5]}"


def test_dtypes_if_privateuse1_is_used_for_the_renamed_backend(neuron, op_db):
    from torch.testing._internal.common_dtype import _dispatch_dtypes

    op = copy.copy(next(op for op in op_db if op.name == "add"))
    op.dtypesIf = dict(op.dtypesIf)
    op.dtypesIfPRIVATEUSE1 = _dispatch_dtypes((torch.float32, torch.bfloat16))
    assert set(op.supported_dtypes("neuron")) == {torch.float32, torch.bfloat16}
    assert set(op.supported_dtypes("privateuse1")) == {torch.float32, torch.bfloat16}
