"""What the model reads of a notebook's outputs: image sizes from headers, errors, unknown mimetypes."""

from __future__ import annotations

import base64
import io
import struct

import nbformat.v4 as nbf

from astro_jupyter.services.notebooks.cells import RenderLimits, image_size, insert_cell, new_notebook, output_text


def test_image_sizes_from_png_gif_and_jpeg_headers() -> None:
    from PIL import Image  # matplotlib's dependency, in the test extra

    for fmt, mime in (("PNG", "image/png"), ("GIF", "image/gif"), ("JPEG", "image/jpeg")):
        buffer = io.BytesIO()
        Image.new("RGB", (321, 123)).save(buffer, fmt)
        assert image_size(mime, base64.b64encode(buffer.getvalue()).decode()) == (321, 123), fmt
    assert image_size("image/png", "not base64 at all!") is None
    assert image_size("image/png", base64.b64encode(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 1)).decode()) is None


def test_outputs_as_text() -> None:
    limits = RenderLimits(cell_chars=100, traceback_frames=2)
    html_only = nbf.new_output("display_data", data={"text/html": "<b>x</b>"})
    assert output_text(html_only, limits) == "[text/html]"
    sized = nbf.new_output("display_data", data={"image/png": "AAAA", "text/plain": "<Figure>"},
                           metadata={"image/png": {"width": 800, "height": 600}})
    assert output_text(sized, limits) == "[image/png 800×600]\n<Figure>"
    error = nbf.new_output("error", ename="KeyError", evalue="'flux'", traceback=["a", "b", "c", "KeyError: 'flux'"])
    assert output_text(error, limits) == "c\nKeyError: 'flux'"


def test_insert_positions() -> None:
    nb = new_notebook()
    for source in ("a", "b", "c"):
        insert_cell(nb, nbf.new_code_cell(source))
    insert_cell(nb, nbf.new_code_cell("first"), index=0)
    insert_cell(nb, nbf.new_code_cell("last"), index=-1)
    insert_cell(nb, nbf.new_code_cell("far"), index=99)
    insert_cell(nb, nbf.new_code_cell("after-b"), after=nb.cells[2].id)
    assert [c.source for c in nb.cells] == ["first", "a", "b", "after-b", "c", "last", "far"]
