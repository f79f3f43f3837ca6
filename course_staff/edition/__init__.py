"""The instructors' tools: the student edition (`make student-edition`), the search for leaks, the rubrics, the SFT checkpoint (`make sft`)."""
