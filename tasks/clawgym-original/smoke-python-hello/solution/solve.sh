# Runs identically for every variant, so it writes each variant's script.
set -e
printf 'print("Hello from ClawGym")\n' > hello.py
printf 'print("42 is the answer")\n' > answer.py
