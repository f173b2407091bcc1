"""artemis-py: an Apache ActiveMQ Artemis-compatible broker node for Python people.

The storage core (journal, node ID) is the Rust extension ``artemis_py._native``;
everything that talks to the network runs on Trio.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("artemis-py")
except PackageNotFoundError:  # running from a source tree without installing
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
