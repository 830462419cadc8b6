"""Who can answer a cell's questions: ``allow_stdin`` of its request, else a comm the frontend opened."""

from __future__ import annotations

from typing import Any

from comm.base_comm import BaseComm, CommManager

from astro_jupyter.kernel.frontend import WHY, no_one_to_answer, parse_allow


class _Comm(BaseComm):
    def publish_msg(self, *args: Any, **kwargs: Any) -> None:  # no kernel session to send on
        pass


class _Kernel:
    """The two things ``no_one_to_answer`` reads from an ipykernel: the request and the comms."""

    def __init__(self, allow_stdin: bool | None) -> None:
        self.content = {} if allow_stdin is None else {"allow_stdin": allow_stdin}
        self.comm_manager = CommManager()

    def get_parent(self, channel: str = "shell") -> dict[str, Any]:
        return {"header": {"msg_type": "execute_request"}, "content": self.content}


class _Shell:
    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel


def test_allow_stdin_off_and_no_frontend_comm_means_no_one() -> None:
    assert no_one_to_answer(_Shell(_Kernel(False))) == WHY
    assert no_one_to_answer(_Shell(_Kernel(True))) is None  # JupyterLab, Notebook, VS Code, console
    assert no_one_to_answer(_Shell(None)) is None  # terminal IPython keeps input()


def test_a_comm_the_frontend_opened_means_someone_is_there() -> None:
    kernel = _Kernel(False)
    ours = _Comm(target_name="jupyter.widget", primary=True, comm_id="k1")  # the kernel's own widget
    kernel.comm_manager.register_comm(ours)
    assert no_one_to_answer(_Shell(kernel)) == WHY  # a widget nobody rendered is no one
    theirs = _Comm(target_name="jupyter.widget.control", primary=False, comm_id="f1")
    kernel.comm_manager.register_comm(theirs)
    assert no_one_to_answer(_Shell(kernel)) is None


def test_allow_lists_name_tools_one_by_one() -> None:
    known = ["kernel_run", "notebook_edit", "read_file"]
    assert parse_allow(["kernel_run,notebook_edit", " read_file "], known) == {"kernel_run", "notebook_edit", "read_file"}
    for bad in (["*"], ["kernel_rnu"], ["file_*"]):
        try:
            parse_allow(bad, known)
        except ValueError as exc:
            assert "not a tool" in str(exc)
        else:
            raise AssertionError(f"{bad} was accepted")
