# pytester runs the plugin's own failure path in an inner pytest.
pytest_plugins = ["pytester"]
