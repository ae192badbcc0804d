from designer.entry import main

main()
