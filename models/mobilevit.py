"""MobileViT-small from transformers (``MobileViTModel``, its config's defaults: hidden sizes
144/192/240, 4.9M parameters) at 128x128, seeded random weights: a real mobile image encoder
of the kind the seed kit targeted, built by the library, not rewritten here. Needs the
``transformers`` extra; the same model is ``transformers:MobileViTModel?image_size=128``."""

from __future__ import annotations

SPEC = "transformers:MobileViTModel?image_size=128"


def build():
    from pytest_sme2.programs.library import LibraryModel

    return LibraryModel(SPEC).build()
