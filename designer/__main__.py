from designer.cli import main

main()
