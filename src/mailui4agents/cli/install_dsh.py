"""``agentmail install-hook dsh``: the DSH ACP profile the ``dsh`` runner boots
(docs/platforms.md, "DSH").

Writes ``$DSH_HOME/profiles/acp`` (``DSH_HOME`` defaults to ``~/.dsh``, as DSH
documents): ``package.json`` (the ``@deepseek-ai/dsh-base`` bundle and the
``@deepseek-ai/dsh-acp`` plugin), ``cordis.patch.yml`` (the ACP plugin, the model
provider, and our plugin) and ``agentmail.mjs`` (the plugin shipped in
``bridge/runners/assets``). Plugins resolve from the profile folder, so
``--node-modules DIR`` links ``node_modules`` to a folder where ``@deepseek-ai/dsh-acp``
is installed (scripts/install-agent-clis.sh makes one); without it, run ``npm install
--legacy-peer-deps`` in the profile. Files are written atomically; a second run
changes nothing.
"""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

from mailui4agents.bridge.runners.dsh import PLUGIN, profile_dir

PACKAGE = {
    "name": "agentmail-dsh-profile",
    "private": True,
    "dependencies": {"@deepseek-ai/dsh-acp": "0.0.1-rc.1"},
    "dsh": {"profile": {"bundles": ["@deepseek-ai/dsh-base"]}},
    "overrides": {"@deepseek-ai/schemastery": "3.18.1"},
}

PATCH = """\
# Written by `agentmail install-hook dsh`: DSH as an ACP agent over stdio for the
# agentmail bridge. Stdout carries only ACP frames; diagnostics go to stderr.
- id: hmr
  disabled: true
- id: session-title-llm
  disabled: true
# Chat Completions provider: baseURL from $DEEPSEEK_BASE_URL (else the vendor's),
# the key from $DEEPSEEK_API_KEY.
- id: llm-deepseek
  config:
    apiKeyEnv: DEEPSEEK_API_KEY
    baseURL: !!js process.env.DEEPSEEK_BASE_URL
- insert:
    - id: code-runtime
      name: '@deepseek-ai/dsh-code-runtime-worker-thread'
    - id: agentmail
      name: './agentmail.mjs'
    - id: acp
      name: '@deepseek-ai/dsh-acp'
      config:
        provider: deepseek-official
        model: !!js process.env.DSH_ACP_MODEL ?? 'deepseek-v4-flash'
"""


def plugin_text() -> str:
    path = resources.files("mailui4agents.bridge.runners") / "assets" / "dsh-agentmail.mjs"
    return path.read_text(encoding="utf-8")


def profile_files() -> dict[str, str]:
    return {
        "package.json": json.dumps(PACKAGE, indent=2) + "\n",
        "cordis.patch.yml": PATCH,
        PLUGIN: plugin_text(),
    }


def install_profile(home: Path, node_modules: Path | None) -> tuple[Path, list[str]]:
    """Write the profile under ``home``; the names of the files that changed."""
    from mailui4agents.cli.install import read_text, write_atomically

    folder = profile_dir(home).absolute()
    changed: list[str] = []
    for name, text in profile_files().items():
        if read_text(folder / name) != text:
            write_atomically(folder / name, text)
            changed.append(name)
    if node_modules is not None:
        link = folder / "node_modules"
        target = node_modules.absolute()
        if not (target / "@deepseek-ai" / "dsh-acp").is_dir():
            raise OSError(f"{target} has no @deepseek-ai/dsh-acp")
        if not (link.is_symlink() and Path(os.readlink(link)) == target):
            if link.is_symlink():
                link.unlink()
            elif link.exists():
                raise OSError(f"{link} exists and is not a link; move it first")
            link.symlink_to(target, target_is_directory=True)
            changed.append("node_modules")
    return folder, changed
