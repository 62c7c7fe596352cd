/* placeholder: written next */
