"""The generic command adapter: ``adapter`` runs any program that prints the backend contract,
``wire`` is that contract as pydantic models."""
