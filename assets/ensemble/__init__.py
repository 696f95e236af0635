"""Asking the model ensemble, on the floor below every model stage (4-7 and the verifier): a question and its
validated answer (``asking``), the evidence each member reads (``evidence``), instruction-like text (``injection``),
the stage's threads (``rounds``), a model stage's asset and its end (``llm_stage``) and the scoring of a claim from
the members' ratings (``scoring``)."""
