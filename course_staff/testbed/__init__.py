"""The course's test bed, shared by tests/ and benchmarks/ (neither imports the other's helpers):

    harness      an nbgrader course in a folder: the labs generated once, solved copies, autograde
    lab_tables   each lab's graded cells with their points, its mistakes and correct variants
    students     submissions made from those tables: one mistake (or variant) spliced into the solution
    classroom    a class of such students, each kind repeated, for the class-grading test and benchmark
"""
