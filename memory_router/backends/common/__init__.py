"""What several adapters share: running programs (``process``, ``groups``, ``threads``), reading
files and output others control (``files``, ``lenient_json``, ``redact``), ``settings``, matching text
(``words``, ``definitions``) and ``unavailable`` (a backend whose adapter cannot run)."""
