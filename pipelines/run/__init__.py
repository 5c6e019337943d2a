"""`segpipe run`: a job file's steps in order, each finished step recorded in a state file so a
re-run resumes where the last one stopped (`state`), and the steps themselves (`runner`)."""
