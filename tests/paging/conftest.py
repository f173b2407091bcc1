"""Nodes whose ``paged.#`` addresses page after a few KiB (tiny pages, so tests cross many)."""

from __future__ import annotations

from pathlib import Path

import pytest

from integration.conftest import (  # noqa: F401 - fixtures used by the tests here
    DEFAULT_ADDRESS_SETTINGS,
    clients,
    make_broker,
    raw_clients,
)


def paging_settings(policy: str = "PAGE", extra: str = "", match: str = "paged.#") -> str:
    return (
        DEFAULT_ADDRESS_SETTINGS
        + f"""
      <address-setting match="{match}">
        <max-size-bytes>20KiB</max-size-bytes>
        <page-size-bytes>16KiB</page-size-bytes>
        <max-read-page-messages>10</max-read-page-messages>
        <address-full-policy>{policy}</address-full-policy>{extra}
      </address-setting>
"""
    )


def page_files(node) -> list[Path]:
    return sorted((node.data_dir / "paging").glob("*/*.page"))


@pytest.fixture
def paged_node(make_broker):  # noqa: F811
    return make_broker(persistence=True, address_settings=paging_settings())
