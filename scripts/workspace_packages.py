"""The packages cargo builds from paths in this repository, for the CI scripts beside this file."""
import tomllib
from pathlib import Path


def path_packages(root):
    """{package name: vendored?} for every Cargo.toml under `root`/crates (members and crates/vendor)."""
    root = Path(root)
    found = {}
    for manifest in root.glob("crates/**/Cargo.toml"):
        try:
            package = tomllib.loads(manifest.read_text()).get("package", {})
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if isinstance(package.get("name"), str):
            found[package["name"]] = "vendor" in manifest.relative_to(root).parts
    return found
