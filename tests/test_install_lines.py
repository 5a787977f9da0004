"""Errors that need an extra print the pip line that works where the user got the package."""


def test_an_install_line_fits_how_the_package_was_installed(tmp_path, monkeypatch):
    import json
    from importlib import metadata

    from sk_toolfilter.basics.errors import install_line

    class Installed:
        def __init__(self, record):
            self.record = record

        def read_text(self, name):
            return json.dumps(self.record) if self.record is not None and name == "direct_url.json" else None

    cases = [
        (None, "pip install 'sk-toolfilter[postgres]'"),
        (
            {"url": "file:///src/sk-toolfilter", "dir_info": {"editable": True}},
            "pip install -e '/src/sk-toolfilter[postgres]'",
        ),
        ({"url": "file:///src/sk-toolfilter", "dir_info": {}}, "pip install '/src/sk-toolfilter[postgres]'"),
        (
            {"url": "file:///dl/sk_toolfilter-0.3.0-py3-none-any.whl", "archive_info": {}},
            "pip install '/dl/sk_toolfilter-0.3.0-py3-none-any.whl[postgres]'",
        ),
    ]
    for record, expected in cases:
        monkeypatch.setattr(metadata, "distributions", lambda name=None, record=record: [Installed(record)])
        assert install_line("postgres") == expected
